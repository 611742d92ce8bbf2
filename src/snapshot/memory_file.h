// The snapshot memory file: guest RAM stored at file offset == guest-physical address.
//
// RAM ends at the end of the highest region; gaps between regions (e.g. the 32-bit PCI hole) and
// all-zero 4 KiB pages are holes, so the file occupies disk only for non-zero guest memory. Past
// the RAM extent comes one 4 KiB trailer block (format 1.1 snapshots; absent in 1.0):
//   "TERNMEMT"   8 bytes magic
//   u32 1        trailer version
//   u32 0        reserved
//   16 bytes     pairing token (the same token is in the state file's pairing section)
//   u64 extent   RAM extent in bytes (= the trailer's own offset)
//   u32 crc32    of the 40 bytes before it; the rest of the block is zero
// `tern restore` maps the RAM part copy-on-write with GuestMemory::create_from_file().
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>

#include "base/fd.h"
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

/// 128 random bits naming one save; the state file and the memory file of one save carry the same
/// token, so a restore can tell a memory file from another save (e.g. left by an interrupted one).
struct PairingToken {
  std::array<uint8_t, 16> bytes{};
  bool operator==(const PairingToken&) const = default;
  /// 32 lowercase hex digits, for messages.
  [[nodiscard]] std::string hex() const;
  /// From getrandom(2). Errors only if the kernel has no entropy source at all.
  [[nodiscard]] static Result<PairingToken> random();
};

/// Size of the trailer block past the RAM extent, in bytes.
inline constexpr uint64_t kMemoryTrailerSize = 4096;

/// Writes every region of `mem` into `fd` — an empty regular file opened for writing (with
/// O_DIRECT if o.direct) — at file offset = region gpa, then the trailer with `token`, then fsync.
/// The file is ftruncate'd to extent + trailer first; 4 KiB pages that are all zero are not
/// written (holes), non-zero runs go out in sequential pwrite()s of up to 8 MiB. Errors (ENOSPC,
/// EIO, "cancelled"...) name `name`; the caller removes the file. Reads guest memory only through
/// GuestMemory::slice(); the guest must not run meanwhile.
[[nodiscard]] Result<MemorySaveResult> write_memory_file(const GuestMemory& mem, int fd,
                                                         const std::string& name,
                                                         const PairingToken& token,
                                                         const MemorySaveOptions& o = {});

/// write_memory_file() into a ReplacementFile beside `path` (".NAME.tern-tmp-XXXXXX", 0600),
/// renamed over `path` only when complete and fsynced: `path` keeps its old contents on any
/// failure or cancel (the temporary is removed), and a VM mapping the old file is unaffected.
/// `path` must be a regular file or not exist. Errors name the path.
[[nodiscard]] Result<MemorySaveResult> save_memory_file(const GuestMemory& mem,
                                                        const std::string& path,
                                                        const MemorySaveOptions& o = {},
                                                        const PairingToken& token = {});

/// A memory file opened for restore.
struct OpenedMemoryFile {
  UniqueFd fd;                        ///< Read-only.
  std::optional<PairingToken> token;  ///< From the trailer; none for a format 1.0 file.
};

/// Opens `path` read-only and checks, before anything is built, that it is a regular file at least
/// as long as the end of the highest region in `specs` ("memory file is 1048576 bytes, the
/// snapshot needs 536870912"), then reads the trailer if there is one (a trailer with the magic but
/// a bad checksum or extent is an error: "trailer is corrupt"). Errors name the path.
[[nodiscard]] Result<OpenedMemoryFile> open_memory_file(const std::string& path,
                                                        std::span<const RegionSpec> specs);

/// The pairing token of memory file `path` whatever its RAM layout (the trailer is its last
/// kMemoryTrailerSize bytes): none for a file without a trailer (format 1.0, or not a memory file
/// at all); an error for a missing or non-regular file or a damaged trailer. Errors name the path.
[[nodiscard]] Result<std::optional<PairingToken>> memory_file_token(const std::string& path);

}  // namespace tern::snap
