// Saving a snapshot's two files so that a crash, a failure or a cancel at any point leaves the
// previous pair or the new one (docs/snapshots.md, "Crash consistency"), and refusing target
// paths that would overwrite the VM's own files.
#pragma once

#include <sys/types.h>

#include <functional>
#include <span>
#include <string>

#include "base/result.h"
#include "memory/guest_memory.h"
#include "snapshot/memory_file.h"
#include "snapshot/state_file.h"

namespace tern::snap {

/// A file of the running VM that a snapshot must not replace, identified by device and inode.
struct ProtectedFile {
  dev_t dev = 0;
  ino_t ino = 0;
  std::string what;  ///< For messages: "the VM's disk 0 (/img/root.ext4)".
  /// True for the memory file a restored VM maps: mem_file_path may name it (the new file is
  /// renamed over it; the VM keeps reading its pages from the old inode), snapshot_path may not.
  bool memory_target_ok = false;
};

/// The ProtectedFile for open file `fd` (fstat). Errors name `what`.
[[nodiscard]] Result<ProtectedFile> protected_file(int fd, std::string what,
                                                   bool memory_target_ok = false);

/// Checks, before anything is written, that `state_path` and `mem_path` name two different files
/// (same directory entry, or the same inode through a hard link, is refused — whatever the
/// spelling), that neither exists as anything but a regular file, that neither is one of
/// `files`, that previous_memory_path(mem_path) (which a save unlinks and re-creates) is neither
/// `state_path` nor one of `files`, and that each name leaves room for its temporary
/// (".NAME.tern-tmp-XXXXXX" within NAME_MAX). Errors name the field: "mem_file_path: /a/b is the
/// VM's disk 0 (/a/b)".
[[nodiscard]] Result<void> check_snapshot_targets(const std::string& state_path,
                                                  const std::string& mem_path,
                                                  std::span<const ProtectedFile> files);

/// How save_snapshot_pair() writes.
struct PairSaveOptions {
  MemorySaveOptions memory;  ///< O_DIRECT, rate limit, progress, cancel.
  /// Runs after both temporaries are written and fsynced and before anything is renamed (the VM
  /// save flushes its disks here). An error fails the save with the old pair untouched.
  std::function<Result<void>()> before_commit;
  /// Runs after the memory file's rename and before the state file's (tests of that window: an
  /// error here is a save that died between its renames).
  std::function<Result<void>()> between_renames;
};

/// ".NAME.tern-prev" beside memory file `mem_path`: the previous pair's memory file, which a save
/// keeps (as a hard link) from just before its memory file's rename until its state file's rename
/// is durable, so that a crash between the two renames still leaves the previous pair on disk.
[[nodiscard]] std::string previous_memory_path(const std::string& mem_path);

/// Saves `state` (plus a pairing section with a fresh token, which the memory file's trailer
/// repeats) and `mem`:
///   1. state file → ".STATE.tern-tmp-XXXXXX", fsync (first: it is small, and a state target
///   that cannot be created fails before the memory is written); 2. memory file →
///   ".MEM.tern-tmp-XXXXXX", fsync; 3. before_commit(); 4. cancel checked once more; 5. the
///   memory file that pairs with the state file now at `state_path` (by token; for a format 1.0
///   state file, a memory file without trailer) is hard-linked as previous_memory_path(), directory
///   fsynced; 6. rename the memory file into place, fsync its directory; 7. rename the state file
///   into place, fsync its directory; 8. remove the previous_memory_path() link.
/// Any error up to step 6 removes both temporaries and leaves the previous files as they were; an
/// error (or a crash) between 6 and 7 leaves the previous pair as `state_path` +
/// previous_memory_path(), which open_paired_memory_file() finds. The caller has checked the
/// paths (check_snapshot_targets). Errors name the file.
[[nodiscard]] Result<MemorySaveResult> save_snapshot_pair(const GuestMemory& mem, StateFile state,
                                                          const std::string& state_path,
                                                          const std::string& mem_path,
                                                          const PairSaveOptions& o);

/// The pairing token in `state`'s pairing section: none for a format 1.0 file (which has none);
/// an error if a 1.1+ file lacks it or it is malformed. `path` names the file in errors.
[[nodiscard]] Result<std::optional<PairingToken>> state_pairing_token(const StateFile& state,
                                                                      const std::string& path);

/// Refuses a memory file that is not from the same save as the state file: tokens differ, or one
/// has a token and the other not. Errors name both paths and say what to do.
/// Opens the memory file from the same save as a state file with `state_token` (none: 1.0):
/// `mem_path` when its token matches; otherwise, when a later save died between its two renames,
/// previous_memory_path(mem_path) if that one's token matches (`*used_previous` is then set, for
/// the caller to say so). Else the check_pairing() error for `mem_path`. Errors name the paths.
[[nodiscard]] Result<OpenedMemoryFile> open_paired_memory_file(
    const std::optional<PairingToken>& state_token, const std::string& state_path,
    const std::string& mem_path, std::span<const RegionSpec> specs, bool* used_previous = nullptr);

[[nodiscard]] Result<void> check_pairing(const std::optional<PairingToken>& state_token,
                                         const std::string& state_path,
                                         const std::optional<PairingToken>& mem_token,
                                         const std::string& mem_path);

}  // namespace tern::snap
