#include "snapshot/memory_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <utility>

#include "base/checked.h"
#include "base/fd.h"
#include "snapshot/codec.h"
#include "snapshot/replace_file.h"

namespace tern::snap {

namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kPage = 4096;
constexpr uint64_t kMaxRun = 8 * MiB;
constexpr auto kProgressInterval = std::chrono::milliseconds(50);
constexpr char kTrailerMagic[8] = {'T', 'E', 'R', 'N', 'M', 'E', 'M', 'T'};
constexpr uint32_t kTrailerVersion = 1;
constexpr size_t kTrailerFields = 8 + 4 + 4 + 16 + 8;  // before the crc32

bool all_zero(const uint8_t* p, size_t n) {
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    uint64_t w[8];
    std::memcpy(w, p + i, sizeof w);
    if ((w[0] | w[1] | w[2] | w[3] | w[4] | w[5] | w[6] | w[7]) != 0) return false;
  }
  for (; i < n; ++i)
    if (p[i] != 0) return false;
  return true;
}

/// Writes the regions of one GuestMemory to an open, already sized file.
class Saver {
 public:
  Saver(const GuestMemory& mem, int fd, const std::string& path, const MemorySaveOptions& o,
        uint64_t total)
      : mem_(mem), fd_(fd), path_(path), o_(o), start_(Clock::now()), last_progress_(start_) {
    res_.total_bytes = total;
    max_run_ = kMaxRun;
    // With a rate limit, write ~50 ms worth at a time so pacing (and progress) stays smooth.
    if (o.rate_limit_bytes_per_s != 0)
      max_run_ = std::clamp(align_down(o.rate_limit_bytes_per_s / 20, kPage), kPage, kMaxRun);
  }

  Result<void> init() {
    if (!o_.direct) return {};
    void* p = ::mmap(nullptr, max_run_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return fail_errno("mmap", "O_DIRECT buffer for " + path_);
    bounce_ = std::unique_ptr<uint8_t, Unmapper>(static_cast<uint8_t*>(p), Unmapper{max_run_});
    return {};
  }

  Result<void> region(const MemoryRegion& r) {
    uint64_t run_gpa = r.gpa, run_len = 0;
    for (uint64_t off = 0; off < r.size;) {
      uint64_t len = std::min(kPage, r.size - off);
      ASSIGN_OR_RETURN(auto page, mem_.slice(r.gpa + off, len));
      if (all_zero(page.data(), page.size())) {
        TRY(flush(run_gpa, run_len));
        res_.zero_bytes += len;
        done_ += len;
        if (done_ - checked_at_ >= MiB) {
          TRY(check_cancel());
          maybe_progress();
        }
      } else {
        if (run_len == 0) run_gpa = r.gpa + off;
        run_len += len;
        if (run_len >= max_run_) TRY(flush(run_gpa, run_len));
      }
      off += len;
    }
    return flush(run_gpa, run_len);
  }

  MemorySaveResult finish() {
    if (o_.progress) o_.progress(done_, res_.total_bytes);
    res_.seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    return res_;
  }

 private:
  /// Writes the pending non-zero run [gpa, gpa+len) at file offset gpa; resets len.
  Result<void> flush(uint64_t gpa, uint64_t& len) {
    if (len == 0) return {};
    ASSIGN_OR_RETURN(auto src, mem_.slice(gpa, len));
    const uint8_t* p = src.data();
    if (bounce_) {
      std::memcpy(bounce_.get(), src.data(), src.size());
      p = bounce_.get();
    }
    for (uint64_t done = 0; done < len;) {
      ssize_t n = retry_eintr(
          [&] { return ::pwrite(fd_, p + done, len - done, static_cast<off_t>(gpa + done)); });
      if (n < 0) return fail_errno("pwrite", path_);
      if (n == 0) return fail_code(EIO, "pwrite", path_ + ": wrote nothing");
      done += static_cast<uint64_t>(n);
    }
    res_.written_bytes += len;
    done_ += len;
    len = 0;
    pace();
    maybe_progress();
    return check_cancel();
  }

  Result<void> check_cancel() const {
    if (o_.cancel && o_.cancel->load()) return fail("save memory file " + path_, "cancelled");
    return {};
  }

  /// Sleeps until the bytes written so far fit the rate limit, or the save is cancelled. Below
  /// 20 pages/s one page is a run and waits page/limit seconds (4096 s at 1 B/s): a cancel
  /// (power-off, SIGTERM) must not wait for that, so the wait is cut into short slices.
  void pace() const {
    if (o_.rate_limit_bytes_per_s == 0) return;
    auto due = std::chrono::duration<double>(static_cast<double>(res_.written_bytes) /
                                             static_cast<double>(o_.rate_limit_bytes_per_s));
    const auto until = start_ + std::chrono::duration_cast<Clock::duration>(due);
    for (auto now = Clock::now(); now < until; now = Clock::now()) {
      if (o_.cancel && o_.cancel->load()) return;
      std::this_thread::sleep_for(std::min<Clock::duration>(until - now, kProgressInterval));
    }
  }

  void maybe_progress() {
    checked_at_ = done_;
    if (!o_.progress || done_ == res_.total_bytes) return;  // the final call comes from finish()
    auto now = Clock::now();
    if (now - last_progress_ < kProgressInterval) return;
    last_progress_ = now;
    o_.progress(done_, res_.total_bytes);
  }

  const GuestMemory& mem_;
  int fd_;
  const std::string& path_;
  const MemorySaveOptions& o_;
  Clock::time_point start_, last_progress_;
  uint64_t max_run_;
  uint64_t done_ = 0, checked_at_ = 0;
  MemorySaveResult res_;
  std::unique_ptr<uint8_t, Unmapper> bounce_;
};

/// End of the highest region (bytes) and the sum of region sizes, or an error on overflow.
Result<std::pair<uint64_t, uint64_t>> extent(std::span<const RegionSpec> specs,
                                             const std::string& what) {
  uint64_t end = 0, total = 0;
  for (const auto& s : specs) {
    auto e = checked_add(s.gpa, s.size);
    auto t = checked_add(total, s.size);
    if (!e || !t || *e > static_cast<uint64_t>(INT64_MAX))
      return fail(what, "region end overflows");
    end = std::max(end, *e);
    total = *t;
  }
  return std::pair{end, total};
}

}  // namespace

std::string PairingToken::hex() const {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  for (uint8_t b : bytes) {
    s += kHex[b >> 4];
    s += kHex[b & 15];
  }
  return s;
}

Result<PairingToken> PairingToken::random() {
  PairingToken t;
  size_t done = 0;
  while (done < t.bytes.size()) {
    ssize_t n = ::getrandom(t.bytes.data() + done, t.bytes.size() - done, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail_errno("getrandom", "snapshot pairing token");
    done += static_cast<size_t>(n);
  }
  return t;
}

namespace {

uint32_t crc32_of(std::span<const uint8_t> b) {
  return static_cast<uint32_t>(
      ::crc32(::crc32(0L, Z_NULL, 0), b.data(), static_cast<uInt>(b.size())));
}

/// The trailer block (kMemoryTrailerSize bytes) for `token` at RAM extent `extent`.
std::vector<uint8_t> trailer_block(const PairingToken& token, uint64_t extent) {
  ByteWriter w;
  w.bytes(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(kTrailerMagic), 8));
  w.u32(kTrailerVersion);
  w.u32(0);
  w.bytes(token.bytes);
  w.u64(extent);
  std::vector<uint8_t> b = w.take();
  uint32_t crc = crc32_of(b);
  b.resize(b.size() + 4);
  std::memcpy(b.data() + kTrailerFields, &crc, 4);
  b.resize(kMemoryTrailerSize, 0);
  return b;
}

/// Writes the trailer at `extent` (from a page-aligned buffer, for O_DIRECT).
Result<void> write_trailer(int fd, const std::string& name, const PairingToken& token,
                           uint64_t extent) {
  std::vector<uint8_t> b = trailer_block(token, extent);
  void* p = ::mmap(nullptr, b.size(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return fail_errno("mmap", "trailer buffer for " + name);
  std::unique_ptr<uint8_t, Unmapper> buf(static_cast<uint8_t*>(p), Unmapper{b.size()});
  std::memcpy(buf.get(), b.data(), b.size());
  ssize_t n =
      retry_eintr([&] { return ::pwrite(fd, buf.get(), b.size(), static_cast<off_t>(extent)); });
  if (n < 0) return fail_errno("pwrite", name + " (trailer)");
  if (static_cast<size_t>(n) != b.size())
    return fail_code(EIO, "pwrite", name + ": short trailer write");
  return {};
}

}  // namespace

Result<MemorySaveResult> write_memory_file(const GuestMemory& mem, int fd, const std::string& name,
                                           const PairingToken& token, const MemorySaveOptions& o) {
  const std::string what = "save memory file " + name;
  std::vector<RegionSpec> specs;
  for (const auto& r : mem.regions()) {
    if (o.direct && (r.gpa % kPage != 0 || r.size % kPage != 0))
      return fail(what, "O_DIRECT needs page-aligned regions");
    specs.push_back({r.gpa, r.size});
  }
  if (specs.empty()) return fail(what, "no guest RAM regions");
  ASSIGN_OR_RETURN(auto ext, extent(specs, what));
  if (ext.first % kPage != 0) return fail(what, "RAM does not end on a 4 KiB boundary");
  struct stat st {};
  if (::fstat(fd, &st) != 0) return fail_errno("fstat", name);
  if (!S_ISREG(st.st_mode)) return fail(what, "not a regular file");
  if (::ftruncate(fd, static_cast<off_t>(ext.first + kMemoryTrailerSize)) != 0)
    return fail_errno("ftruncate",
                      name + " to " + std::to_string(ext.first + kMemoryTrailerSize) + " bytes");
  Saver s(mem, fd, name, o, ext.second);
  TRY(s.init());
  for (const auto& r : mem.regions()) TRY(s.region(r));
  TRY(write_trailer(fd, name, token, ext.first));
  if (::fsync(fd) != 0) return fail_errno("fsync", name);
  return s.finish();
}

Result<MemorySaveResult> save_memory_file(const GuestMemory& mem, const std::string& path,
                                          const MemorySaveOptions& o, const PairingToken& token) {
  struct stat st {};
  // Only a regular file (or nothing) is replaced: renaming over /dev/full would replace the node.
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    return fail("save memory file " + path, "not a regular file");
  ASSIGN_OR_RETURN(auto f, ReplacementFile::create(path, o.direct));
  ASSIGN_OR_RETURN(auto r, write_memory_file(mem, f.fd(), path, token, o));
  TRY(f.sync_and_close());
  TRY(f.commit());
  return r;
}

namespace {

/// The trailer at file offset `at` of `fd`, if there is one: none when the bytes there are not a
/// trailer (no magic: a format 1.0 file); an error for a damaged one (checksum, version, or an
/// extent field that is not its own offset). `what` names the file.
Result<std::optional<PairingToken>> read_trailer(int fd, uint64_t at, const std::string& what) {
  std::array<uint8_t, kTrailerFields + 4> t{};
  ssize_t n = retry_eintr([&] { return ::pread(fd, t.data(), t.size(), static_cast<off_t>(at)); });
  if (n < 0) return fail_errno("read", what + " (trailer)");
  if (static_cast<size_t>(n) != t.size() || std::memcmp(t.data(), kTrailerMagic, 8) != 0)
    return std::optional<PairingToken>{};
  ByteReader r(t, what + " trailer");
  TRY(r.bytes(8));
  ASSIGN_OR_RETURN(uint32_t version, r.u32());
  TRY(r.u32());
  ASSIGN_OR_RETURN(auto tok, r.bytes(16));
  ASSIGN_OR_RETURN(uint64_t extent_field, r.u64());
  ASSIGN_OR_RETURN(uint32_t crc, r.u32());
  if (crc != crc32_of(std::span<const uint8_t>(t).first(kTrailerFields)))
    return fail(what, "trailer is corrupt (checksum mismatch)");
  if (version != kTrailerVersion)
    return fail(what, "trailer version " + std::to_string(version) + " (this tern reads " +
                          std::to_string(kTrailerVersion) + ")");
  if (extent_field != at)
    return fail(what, "trailer is corrupt: it says RAM ends at " + std::to_string(extent_field) +
                          ", the snapshot's RAM ends at " + std::to_string(at));
  PairingToken token;
  std::memcpy(token.bytes.data(), tok.data(), token.bytes.size());
  return std::optional<PairingToken>{token};
}

/// Opens `path` read-only (a FIFO fails the regular-file check instead of blocking) and returns
/// it with its size in bytes.
Result<std::pair<UniqueFd, uint64_t>> open_regular(const std::string& path) {
  int raw = retry_eintr([&] { return ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC); });
  if (raw < 0) return fail_errno("memory file", path);
  UniqueFd fd(raw);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return fail_errno("fstat", path);
  if (!S_ISREG(st.st_mode)) return fail("memory file " + path, "not a regular file");
  return std::pair{std::move(fd), static_cast<uint64_t>(st.st_size)};
}

}  // namespace

Result<OpenedMemoryFile> open_memory_file(const std::string& path,
                                          std::span<const RegionSpec> specs) {
  const std::string what = "memory file " + path;
  ASSIGN_OR_RETURN(auto ext, extent(specs, what));
  ASSIGN_OR_RETURN(auto opened, open_regular(path));
  OpenedMemoryFile out{std::move(opened.first), std::nullopt};
  const uint64_t size = opened.second;
  if (size < ext.first)
    return fail("memory file", path + ": memory file is " + std::to_string(size) +
                                   " bytes, the snapshot needs " + std::to_string(ext.first));
  if (size < ext.first + kTrailerFields + 4) return out;  // no trailer: format 1.0
  ASSIGN_OR_RETURN(out.token, read_trailer(out.fd.get(), ext.first, what));
  return out;
}

Result<std::optional<PairingToken>> memory_file_token(const std::string& path) {
  ASSIGN_OR_RETURN(auto opened, open_regular(path));
  if (opened.second < kMemoryTrailerSize) return std::optional<PairingToken>{};
  return read_trailer(opened.first.get(), opened.second - kMemoryTrailerSize,
                      "memory file " + path);
}

}  // namespace tern::snap
