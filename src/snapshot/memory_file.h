// The snapshot memory file: guest RAM stored at file offset == guest-physical address.
//
// The file is as long as the end of the highest RAM region; gaps between regions (e.g. the 32-bit
// PCI hole) and all-zero 4 KiB pages are holes, so the file occupies disk only for non-zero guest
// memory. `tern restore` maps it copy-on-write with GuestMemory::create_from_file().
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "base/result.h"
#include "memory/guest_memory.h"

namespace tern::snap {

/// How save_memory_file() writes.
struct MemorySaveOptions {
  /// O_DIRECT writes from a page-aligned bounce buffer (bypasses the page cache). Fails naming
  /// the path if the filesystem refuses O_DIRECT; needs page-aligned regions.
  bool direct = false;
  /// Caps the bytes actually written per second (zero pages skipped are free); 0: no limit.
  uint64_t rate_limit_bytes_per_s = 0;
  /// Called at most every 50 ms while saving and once at the end with done == total. done counts
  /// zero-skipped bytes too. Runs on the saving thread.
  std::function<void(uint64_t done_bytes, uint64_t total_bytes)> progress;
  /// When set and it becomes true, the save stops within one write (≤ ~50 ms of rate-limited
  /// writing) and fails with "cancelled" (the partial file is removed, as for any failure).
  const std::atomic<bool>* cancel = nullptr;
};

/// What save_memory_file() did, in bytes (total = written + zero) and wall-clock seconds.
struct MemorySaveResult {
  uint64_t total_bytes = 0;
  uint64_t written_bytes = 0;
  uint64_t zero_bytes = 0;
  double seconds = 0;
};

/// Writes every region of `mem` to `path` (created 0600, O_TRUNC; must be or become a regular
/// file) at file offset = region gpa. The file is ftruncate'd to the end of the highest region
/// first; 4 KiB pages that are all zero are not written (holes), non-zero runs go out in
/// sequential pwrite()s of up to 8 MiB. fsync at the end. Errors (ENOSPC, EACCES, EIO...) name
/// the path; a failed save unlinks the partial file. Reads guest memory only through
/// GuestMemory::slice(); the guest must not run meanwhile.
[[nodiscard]] Result<MemorySaveResult> save_memory_file(const GuestMemory& mem,
                                                        const std::string& path,
                                                        const MemorySaveOptions& o = {});

/// Checks, before anything is built, that `path` exists, is a regular file and is at least as
/// long as the end of the highest region in `specs`. Errors name the path and the sizes
/// ("memory file is 1048576 bytes, the snapshot needs 536870912").
[[nodiscard]] Result<void> check_memory_file(const std::string& path,
                                             std::span<const RegionSpec> specs);

}  // namespace tern::snap
