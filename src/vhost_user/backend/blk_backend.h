// tern's own vhost-user-blk back-end (`tern vhost-user-blk --socket PATH --disk path=IMG,...`):
// the built-in virtio-blk device's request parser (BlockQueueHandler) and BlockExecutor (io_uring,
// cache modes, O_DIRECT bounce) in a separate process that maps the VM's RAM from the fds of
// SET_MEM_TABLE / ADD_MEM_REG: the "stub domain" of the Xen thread. It listens at the socket,
// serves one front-end at a time and accepts the next when it disconnects (a restarted VMM, a
// restore), keeps inflight descriptors in the front-end's INFLIGHT_SHMFD region so a restarted
// back-end resubmits them, and once the image and socket are open confines itself with a seccomp
// filter (docs/vhost-user-backend.md lists what is allowed).
#pragma once

#include <atomic>
#include <string>

#include "base/result.h"
#include "block/disk_config.h"

namespace tern::vhost_user {

/// What `tern vhost-user-blk` was asked for.
struct BlkBackendOptions {
  std::string socket;  ///< Path to listen at.
  DiskConfig disk;     ///< --disk: path, cache, readonly, serial, queues (the most it offers), io.
  bool seccomp = true; ///< --seccomp off disables the filter (debugging).
  bool stats_on_exit = true;  ///< Log the counters when it stops.
};

/// Opens the image, listens, confines itself and serves until `stop` becomes true (SIGTERM/SIGINT
/// in the command). Errors before serving (image, socket) name the option; a front-end's protocol
/// error drops that connection only (counted, logged) and the next one is accepted.
[[nodiscard]] Result<void> run_blk_backend(const BlkBackendOptions& options,
                                           const std::atomic<bool>& stop);

/// Asks a running run_blk_backend to log its counters (async-signal-safe: SIGUSR1).
void request_blk_backend_stats() noexcept;

}  // namespace tern::vhost_user
