// run_vmm(): tern's main thread as the control thread — signals, the optional API server, the
// control loop — shared by `tern run`, `tern --config-file` and `tern --api-sock`.
#pragma once

#include <string>

#include "vmm/control_loop.h"
#include "api/event_log.h"

namespace tern {

/// Watches SIGINT/SIGTERM/SIGHUP (call before any other thread exists), serves the control API on
/// `api_sock` when it is non-empty, starts the configured VM first when `start_now`, then runs
/// `loop` on the calling thread until the VM stops (or, with no VM, a stop signal arrives).
/// `first`, when given, replaces the start (e.g. a snapshot restore) and runs at the same point.
/// Returns tern's exit status (README); prints the reason for every non-zero one on stderr.
int run_vmm(ControlLoop& loop, EventLog& events, const std::string& api_sock, bool start_now,
            const std::function<tl::expected<void, StartFailure>()>& first = {});

/// Options of tern itself without a subcommand (Firecracker's style of starting a VMM).
struct VmmOptions {
  std::string api_sock;     ///< --api-sock PATH
  std::string config_file;  ///< --config-file FILE
};

/// `tern --api-sock PATH` (wait for configuration through the API) and/or `tern --config-file
/// FILE` (start the VM it describes at once).
int run_vmm_command(const VmmOptions& options);

}  // namespace tern
