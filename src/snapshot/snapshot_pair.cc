#include "snapshot/snapshot_pair.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "base/log.h"
#include "snapshot/codec.h"
#include "snapshot/replace_file.h"
#include "snapshot/sections.h"

namespace tern::snap {

namespace {

/// How much longer than NAME a temporary ".NAME.tern-tmp-XXXXXX" is (".NAME.tern-prev" is less).
constexpr size_t kTempNameExtra = 1 + sizeof(".tern-tmp-XXXXXX") - 1;

/// Where a target path points: its directory entry and, if it exists, its inode.
struct Target {
  const char* field = nullptr;
  const std::string* path = nullptr;
  dev_t dir_dev = 0;
  ino_t dir_ino = 0;
  std::string base;
  bool exists = false;
  dev_t dev = 0;
  ino_t ino = 0;
};

/// `extra`: how many bytes longer than the name the directory must allow (for the temporary).
Result<Target> inspect(const char* field, const std::string& path, size_t extra = kTempNameExtra) {
  Target t;
  t.field = field;
  t.path = &path;
  if (path.empty()) return fail(field, "empty path");
  auto slash = path.rfind('/');
  t.base = slash == std::string::npos ? path : path.substr(slash + 1);
  if (t.base.empty() || t.base == "." || t.base == "..")
    return fail(field, path + ": not a file name");
  const std::string dir = dir_of(path);
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return fail_errno(field, dir);
  if (!S_ISDIR(st.st_mode)) return fail(field, dir + ": not a directory");
  // The temporary ".NAME.tern-tmp-XXXXXX" must fit too (the state file's is made only after the
  // whole memory file is written).
  const long name_max = ::pathconf(dir.c_str(), _PC_NAME_MAX);
  if (name_max > 0 && t.base.size() + extra > static_cast<size_t>(name_max))
    return fail(field, path + ": file name too long (" + std::to_string(t.base.size()) +
                           " bytes; tern writes it first as .NAME.tern-tmp-XXXXXX, " +
                           std::to_string(extra) + " more, and " + dir + " allows at most " +
                           std::to_string(name_max) + ")");
  t.dir_dev = st.st_dev;
  t.dir_ino = st.st_ino;
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode))
      return fail(field,
                  path + ": exists and is not a regular file (tern only replaces regular files)");
    t.exists = true;
    t.dev = st.st_dev;
    t.ino = st.st_ino;
  } else if (errno != ENOENT) {
    return fail_errno(field, path);
  }
  return t;
}

/// Step 5 of save_snapshot_pair(): keeps the memory file that pairs with the state file now at
/// `state_path` reachable as previous_memory_path(mem_path) until the new state file is in place.
/// Nothing to keep when there is no readable state file or nothing pairs with it. When `mem_path`
/// does not pair but an earlier ".tern-prev" does (a save died between its renames), that one is
/// the previous pair's and stays. kLinked when this call made the link (then `mem_path` still holds
/// the same file, and the link may go again if the memory file is not replaced after all). On a
/// filesystem without hard links (vfat, exfat, some FUSE and network filesystems) nothing can be
/// kept: the save goes on, saying once that the step-6/7 window is open there.
enum class Kept { kNone, kEarlier, kLinked };
Result<Kept> keep_previous_memory(const std::string& state_path, const std::string& mem_path) {
  const std::string prev = previous_memory_path(mem_path);
  // The token the state file on disk expects: nothing when there is no readable state file; an
  // empty token for a format 1.0 one, whose memory file has no trailer (and still must be kept).
  std::optional<std::optional<PairingToken>> want;
  if (auto old = read_state_file(state_path); old) {
    if (auto t = state_pairing_token(*old, state_path); t) want = *t;
  }
  auto pairs = [&](const std::string& path) {
    auto t = memory_file_token(path);
    return want && t && *t == *want;
  };
  const bool mem_pairs = pairs(mem_path);
  if (!mem_pairs && pairs(prev)) return Kept::kEarlier;  // the previous pair is STATE + .tern-prev
  if (::unlink(prev.c_str()) != 0 && errno != ENOENT) return fail_errno("unlink", prev);
  if (!mem_pairs) return Kept::kNone;
  if (::link(mem_path.c_str(), prev.c_str()) != 0) {
    if (errno == EPERM || errno == EOPNOTSUPP || errno == EMLINK) {
      static std::atomic<bool> said{false};
      if (!said.exchange(true))
        spdlog::warn(
            "snapshot: cannot keep the previous memory file as {} ({}: no hard links on "
            "this filesystem?); a save that dies between its two renames leaves the "
            "previous pair unrestorable here",
            prev, std::strerror(errno));
      return Kept::kNone;
    }
    return fail_errno("link", mem_path + " to " + prev + " (keeps the previous snapshot's memory)");
  }
  TRY(fsync_dir(dir_of(prev)));
  return Kept::kLinked;
}

bool same_file(const Target& a, const Target& b) {
  if (a.dir_dev == b.dir_dev && a.dir_ino == b.dir_ino && a.base == b.base) return true;
  return a.exists && b.exists && a.dev == b.dev && a.ino == b.ino;
}

/// The ProtectedFile among `files` that target `t` is, if any (`memory`: mem_file_path's rules).
const ProtectedFile* protected_match(const Target& t, std::span<const ProtectedFile> files,
                                     bool memory) {
  if (!t.exists) return nullptr;
  for (const ProtectedFile& f : files) {
    if (f.dev != t.dev || f.ino != t.ino) continue;
    if (memory && f.memory_target_ok) continue;
    return &f;
  }
  return nullptr;
}

}  // namespace

Result<ProtectedFile> protected_file(int fd, std::string what, bool memory_target_ok) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return fail_errno("fstat", what);
  return ProtectedFile{st.st_dev, st.st_ino, std::move(what), memory_target_ok};
}

Result<void> check_snapshot_targets(const std::string& state_path, const std::string& mem_path,
                                    std::span<const ProtectedFile> files) {
  ASSIGN_OR_RETURN(Target state, inspect("snapshot_path", state_path));
  ASSIGN_OR_RETURN(Target mem, inspect("mem_file_path", mem_path));
  if (same_file(state, mem))
    return fail("mem_file_path", mem_path + " is the same file as snapshot_path " + state_path +
                                     " (the two files of a snapshot must differ)");
  for (const Target* t : {&state, &mem}) {
    if (const ProtectedFile* f = protected_match(*t, files, t == &mem))
      return fail(t->field, *t->path + " is " + f->what + "; a snapshot must not replace it");
  }
  // The save unlinks and re-creates ".MEM.tern-prev" (steps 5 and 8): it must be neither the
  // state file (which the save would then delete after succeeding) nor one of the VM's disks.
  const std::string prev_path = previous_memory_path(mem_path);
  ASSIGN_OR_RETURN(Target prev, inspect("mem_file_path", prev_path, /*extra=*/0));
  if (same_file(state, prev))
    return fail("snapshot_path", state_path + " is " + prev_path +
                                     ", where a save keeps the previous memory file of " +
                                     mem_path + " (.NAME.tern-prev); choose another name");
  if (const ProtectedFile* f = protected_match(prev, files, /*memory=*/true))
    return fail("mem_file_path",
                mem_path + ": " + prev_path + ", which a save replaces, is " + f->what);
  return {};
}

Result<MemorySaveResult> save_snapshot_pair(const GuestMemory& mem, StateFile state,
                                            const std::string& state_path,
                                            const std::string& mem_path, const PairSaveOptions& o) {
  ASSIGN_OR_RETURN(PairingToken token, PairingToken::random());
  std::erase_if(state.sections, [](const StateSection& s) { return s.id == kPairingSection; });
  state.sections.push_back(StateSection{
      kPairingSection, kPairingSectionVersion, {token.bytes.begin(), token.bytes.end()}});

  struct stat st {};
  if (::lstat(mem_path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    return fail("save memory file " + mem_path, "not a regular file");
  // Steps 1-4: nothing but the two temporaries is touched; any error removes them. The state
  // file (small, and complete before the memory file) goes first, so that a state target that
  // cannot be created fails before minutes of memory writing, not after.
  ASSIGN_OR_RETURN(ReplacementFile state_file, prepare_state_file(state_path, state));
  ASSIGN_OR_RETURN(ReplacementFile mem_file, ReplacementFile::create(mem_path, o.memory.direct));
  ASSIGN_OR_RETURN(MemorySaveResult r,
                   write_memory_file(mem, mem_file.fd(), mem_path, token, o.memory));
  TRY(mem_file.sync_and_close());
  if (o.before_commit) TRY(o.before_commit());
  if (o.memory.cancel && o.memory.cancel->load())
    return fail("save snapshot " + state_path, "cancelled");
  // Steps 5-8: memory file first (made durable by its directory fsync), state file last. Between
  // the two renames the new memory file sits beside the old state file, whose memory file is then
  // the ".tern-prev" link of step 5 (restore finds it there by its pairing token).
  ASSIGN_OR_RETURN(const Kept kept, keep_previous_memory(state_path, mem_path));
  const bool linked = kept == Kept::kLinked;
  const std::string prev = previous_memory_path(mem_path);
  if (auto ok = mem_file.commit(); !ok) {
    // The memory file is still the old one: a link made above is not needed (nor harmful if
    // left). One kept from an earlier save is the previous pair's only memory file: it stays.
    if (auto t = memory_file_token(mem_path); linked && t && *t != token) ::unlink(prev.c_str());
    return tl::unexpected(ok.error());
  }
  // A failure now leaves the previous pair as state_path + prev: the message says so.
  auto keeping_previous = [&](Error e) {
    if (kept != Kept::kNone)
      e.context += " (the previous snapshot is " + state_path + " with memory file " + prev +
                   ", which tern restore finds by itself)";
    return tl::unexpected<Error>(std::move(e));
  };
  if (o.between_renames) {
    if (auto ok = o.between_renames(); !ok) return keeping_previous(ok.error());
  }
  if (auto ok = state_file.commit(); !ok) return keeping_previous(ok.error());
  // Step 8: the new pair is durable; the previous memory file goes (a crash before this leaves a
  // stale link that the next save replaces and restore ignores).
  if (::unlink(prev.c_str()) != 0 && errno != ENOENT)
    spdlog::warn("snapshot: could not remove {}: {}", prev, std::strerror(errno));
  return r;
}

std::string previous_memory_path(const std::string& mem_path) {
  auto slash = mem_path.rfind('/');
  std::string dir = slash == std::string::npos ? std::string() : mem_path.substr(0, slash + 1);
  std::string base = slash == std::string::npos ? mem_path : mem_path.substr(slash + 1);
  return dir + "." + base + ".tern-prev";
}

Result<OpenedMemoryFile> open_paired_memory_file(const std::optional<PairingToken>& state_token,
                                                 const std::string& state_path,
                                                 const std::string& mem_path,
                                                 std::span<const RegionSpec> specs,
                                                 bool* used_previous) {
  ASSIGN_OR_RETURN(auto mem, open_memory_file(mem_path, specs));
  auto paired = check_pairing(state_token, state_path, mem.token, mem_path);
  if (paired) return mem;
  // Also for a format 1.0 state file (no token) beside a 1.1 memory file: a save over a 1.0 pair
  // that died between its renames kept the 1.0 memory file (no trailer) there.
  const std::string prev = previous_memory_path(mem_path);
  if (auto kept = open_memory_file(prev, specs); kept && kept->token == state_token) {
    if (used_previous) *used_previous = true;
    return std::move(*kept);
  }
  return tl::unexpected(paired.error());
}

Result<std::optional<PairingToken>> state_pairing_token(const StateFile& state,
                                                        const std::string& path) {
  const StateSection* s = state.find(kPairingSection);
  if (!s) {
    if (state.format_minor >= 1)
      return fail("snapshot", path + ": no pairing section (format 1." +
                                  std::to_string(state.format_minor) + " has one)");
    return std::optional<PairingToken>{};
  }
  if (s->version != kPairingSectionVersion)
    return fail("snapshot", path + ": pairing section version " + std::to_string(s->version) +
                                " (this tern reads version " +
                                std::to_string(kPairingSectionVersion) + ")");
  PairingToken t;
  if (s->data.size() != t.bytes.size())
    return fail("snapshot", path + ": pairing section is " + std::to_string(s->data.size()) +
                                " bytes, expected " + std::to_string(t.bytes.size()));
  std::memcpy(t.bytes.data(), s->data.data(), t.bytes.size());
  return std::optional<PairingToken>{t};
}

Result<void> check_pairing(const std::optional<PairingToken>& state_token,
                           const std::string& state_path,
                           const std::optional<PairingToken>& mem_token,
                           const std::string& mem_path) {
  if (state_token == mem_token) return {};
  const std::string hint =
      " — they are not from the same save (a save interrupted between its two renames leaves the "
      "new memory file beside the old state file); give the memory file saved with this state file";
  if (!mem_token)
    return fail("snapshot", "memory file " + mem_path + " has no pairing token, state file " +
                                state_path + " expects " + state_token->hex() + hint);
  if (!state_token)
    return fail("snapshot", "memory file " + mem_path + " has pairing token " + mem_token->hex() +
                                ", state file " + state_path + " (format 1.0) has none" + hint);
  return fail("snapshot", "memory file " + mem_path + " has pairing token " + mem_token->hex() +
                              ", state file " + state_path + " expects " + state_token->hex() +
                              hint);
}

}  // namespace tern::snap
