#include "snapshot/state_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "base/fd.h"
#include "snapshot/codec.h"

namespace tern::snap {

namespace {

constexpr char kMagic[8] = {'T', 'E', 'R', 'N', 'S', 'N', 'A', 'P'};
constexpr size_t kTrailer = 4;  // u32 crc32

uint32_t crc32_of(std::span<const uint8_t> b) {
  uLong c = ::crc32(0L, Z_NULL, 0);
  // zlib takes uInt lengths: feed large inputs in pieces.
  while (!b.empty()) {
    size_t n = std::min<size_t>(b.size(), 1u << 30);
    c = ::crc32(c, b.data(), static_cast<uInt>(n));
    b = b.subspan(n);
  }
  return static_cast<uint32_t>(c);
}

/// Empty if `f` can be written; otherwise what is wrong with it.
std::string invalid_reason(const StateFile& f) {
  if (f.tern_version.size() > kMaxTernVersionLen)
    return "tern_version is " + std::to_string(f.tern_version.size()) + " bytes, the format allows " +
           std::to_string(kMaxTernVersionLen);
  std::vector<uint32_t> ids;
  ids.reserve(f.sections.size());
  for (const auto& s : f.sections) ids.push_back(s.id);
  std::sort(ids.begin(), ids.end());
  auto dup = std::adjacent_find(ids.begin(), ids.end());
  if (dup != ids.end()) return "duplicate section id " + std::to_string(*dup);
  return {};
}

bool is_truncation(const Error& e) { return e.context.rfind("truncated", 0) == 0; }

/// Parses everything after the magic and version, up to and including the stored checksum (which
/// is returned but not verified). Structural errors only.
Result<uint32_t> parse_layout(ByteReader& r, StateFile& out) {
  ASSIGN_OR_RETURN(uint32_t flags, r.u32());
  if (flags != 0) return fail(r.what(), "unsupported header flags " + std::to_string(flags));
  ASSIGN_OR_RETURN(out.tern_version, r.string(kMaxTernVersionLen));
  ASSIGN_OR_RETURN(uint32_t count, r.u32());
  for (uint32_t i = 0; i < count; ++i) {
    StateSection s;
    ASSIGN_OR_RETURN(s.id, r.u32());
    ASSIGN_OR_RETURN(s.version, r.u32());
    ASSIGN_OR_RETURN(uint64_t len, r.u64());
    if (len > r.remaining())
      return fail(r.what(), "truncated: section " + std::to_string(s.id) + " is " +
                                std::to_string(len) + " bytes, only " +
                                std::to_string(r.remaining()) + " left in the file");
    ASSIGN_OR_RETURN(auto data, r.bytes(static_cast<size_t>(len)));
    s.data.assign(data.begin(), data.end());
    out.sections.push_back(std::move(s));
  }
  ASSIGN_OR_RETURN(uint32_t crc, r.u32());
  TRY(r.expect_end());
  return crc;
}

/// Writes all of `b` at the current offset of `fd`.
Result<void> write_all(int fd, std::span<const uint8_t> b, const std::string& path) {
  while (!b.empty()) {
    ssize_t n = retry_eintr([&] { return ::write(fd, b.data(), b.size()); });
    if (n < 0) return fail_errno("write", path);
    b = b.subspan(static_cast<size_t>(n));
  }
  return {};
}

}  // namespace

const StateSection* StateFile::find(uint32_t id) const {
  for (const auto& s : sections)
    if (s.id == id) return &s;
  return nullptr;
}

std::vector<uint8_t> serialize_state_file(const StateFile& f) {
  TERN_CHECK(invalid_reason(f).empty());
  ByteWriter w;
  w.bytes(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(kMagic), sizeof kMagic));
  w.u16(kStateFormatMajor);
  w.u16(kStateFormatMinor);
  w.u32(0);  // header flags
  w.string(f.tern_version);
  w.u32(static_cast<uint32_t>(f.sections.size()));
  for (const auto& s : f.sections) {
    w.u32(s.id);
    w.u32(s.version);
    w.u64(s.data.size());
    w.bytes(s.data);
  }
  uint32_t crc = crc32_of(w.data());
  w.u32(crc);
  return w.take();
}

Result<StateFile> parse_state_file(std::span<const uint8_t> bytes, const std::string& name) {
  const std::string what = "state file " + name;
  if (bytes.size() < sizeof kMagic) {
    if (bytes.empty() || std::memcmp(bytes.data(), kMagic, bytes.size()) == 0)
      return fail(what, "truncated: " + std::to_string(bytes.size()) + " byte(s)");
    return fail(what, "not a tern state file (bad magic)");
  }
  if (std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    return fail(what, "not a tern state file (bad magic)");
  if (bytes.size() > kMaxStateFileSize)
    return fail(what, "file is " + std::to_string(bytes.size()) + " bytes, the limit is " +
                          std::to_string(kMaxStateFileSize));

  ByteReader r(bytes, what);
  TRY(r.bytes(sizeof kMagic));
  ASSIGN_OR_RETURN(uint16_t major, r.u16());
  ASSIGN_OR_RETURN(uint16_t minor, r.u16());
  if (major != kStateFormatMajor)
    return fail(what, "format version " + std::to_string(major) + "." + std::to_string(minor) +
                          ", this tern reads " + std::to_string(kStateFormatMajor) + ".x");

  StateFile f;
  f.format_minor = minor;
  auto stored_crc = parse_layout(r, f);
  // The checksum decides between "corrupt" and a structural error; a file that ends before its
  // own lengths say it should is reported as truncated rather than corrupt.
  bool crc_ok = bytes.size() >= kTrailer &&
                [&] {
                  uint32_t stored;
                  std::memcpy(&stored, bytes.data() + bytes.size() - kTrailer, kTrailer);
                  return crc32_of(bytes.first(bytes.size() - kTrailer)) == stored;
                }();
  if (!stored_crc) {
    if (crc_ok || is_truncation(stored_crc.error())) return tl::unexpected(stored_crc.error());
    return fail(what, "checksum mismatch: the file is corrupt");
  }
  if (!crc_ok) return fail(what, "checksum mismatch: the file is corrupt");
  if (auto why = invalid_reason(f); !why.empty()) return fail(what, why);
  return f;
}

Result<StateFile> read_state_file(const std::string& path) {
  // O_NONBLOCK: a FIFO must not block the open (and with it tern's signal handling); anything but a
  // regular file is refused below. Reads of a regular file ignore the flag.
  ASSIGN_OR_RETURN(UniqueFd fd, open_file(path, O_RDONLY | O_NONBLOCK));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return fail_errno("fstat", path);
  if (!S_ISREG(st.st_mode)) return fail("state file " + path, "not a regular file");
  if (static_cast<uint64_t>(st.st_size) > kMaxStateFileSize)
    return fail("state file " + path, "file is " + std::to_string(st.st_size) +
                                          " bytes, the limit is " +
                                          std::to_string(kMaxStateFileSize));
  std::vector<uint8_t> data(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = retry_eintr([&] { return ::read(fd.get(), data.data() + done, data.size() - done); });
    if (n < 0) return fail_errno("read", path);
    if (n == 0) break;  // shrank while reading: parsed as truncated
    done += static_cast<size_t>(n);
  }
  data.resize(done);
  return parse_state_file(data, path);
}

Result<ReplacementFile> prepare_state_file(const std::string& path, const StateFile& f) {
  if (auto why = invalid_reason(f); !why.empty()) return fail("write state file " + path, why);
  const std::vector<uint8_t> bytes = serialize_state_file(f);
  // Only a regular file (or nothing) is replaced: renaming over /dev/null or a FIFO would replace a
  // device node.
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    return fail("write state file " + path, path + " exists and is not a regular file");
  ASSIGN_OR_RETURN(auto tmp, ReplacementFile::create(path));
  TRY(write_all(tmp.fd(), bytes, path));
  TRY(tmp.sync_and_close());
  return tmp;
}

Result<void> write_state_file(const std::string& path, const StateFile& f) {
  ASSIGN_OR_RETURN(auto tmp, prepare_state_file(path, f));
  return tmp.commit();
}

}  // namespace tern::snap
