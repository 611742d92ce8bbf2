// Image locking, as QEMU does it (file-posix.c, locking=on): an open file description (OFD)
// lock on the whole image, so that two VMs never write one disk at once. A writable image takes
// a write lock (excludes every other lock), a read-only one a read lock (readers share). OFD
// locks belong to the open file description, not the process: two opens of one image in one
// process conflict too, and the lock goes with the last fd of that open (no unlock call).
#pragma once

#include <string>
#include <string_view>

#include "base/fd.h"
#include "base/result.h"

namespace tern {

/// The remedy lock_image's conflict errors end with. `tern restore` has no disk options, so
/// restore_lock_hint() rewrites it for a restore.
inline constexpr std::string_view kLockingOffRemedy = "add locking=off to share it anyway";

/// `message` with kLockingOffRemedy replaced by what a restore can do instead: let the VM that
/// saved the snapshot end first (take the snapshot with --exit). Other messages are unchanged.
[[nodiscard]] std::string restore_lock_hint(std::string message);

/// Takes a non-blocking F_OFD_SETLK lock on all of `fd` (a regular file or block device): a
/// write lock when `write`, else a read lock. `field` is how errors name the image ("--disk
/// path=IMG"). A conflict is refused naming who holds it and the remedy:
/// "<field>: in use by another process (a write lock is held on it); stop that VM, or add
/// locking=off to share it anyway" — "another disk of this VM" instead when a lock is held through
/// another fd of this process, "a read lock" when the holder opened it read-only. A file system
/// without locks (ENOLCK, EINVAL) fails: "<field>: cannot lock the image (<errno text>); add
/// locking=off to open it without a lock".
[[nodiscard]] Result<void> lock_image(BorrowedFd fd, bool write, const std::string& field);

}  // namespace tern
