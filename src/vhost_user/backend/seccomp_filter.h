// The back-end's seccomp filter (docs/vhost-user-backend.md lists every allowed system call and
// why). Installed once the image and the listening socket are open: from then on the process
// can serve the socket, map the fds the front-end sends, do I/O on fds it already holds, start
// queue threads and io_uring rings, and nothing else — no open/openat, socket, connect, execve,
// ptrace. Denied calls fail with EPERM (not a kill): an unexpected call surfaces as an error on
// the path that made it, counted and logged, and the guest's disk keeps working where it can.
#pragma once

#include "base/result.h"

namespace tern::vhost_user {

/// Installs the filter on every thread of the process (SECCOMP_FILTER_FLAG_TSYNC), with
/// no_new_privs set. `socket_dir_fd` is the only directory fd unlinkat() may use (to remove the
/// socket at exit); -1 allows none. Errors name libseccomp's failing call.
[[nodiscard]] Result<void> install_backend_seccomp(int socket_dir_fd);

}  // namespace tern::vhost_user
