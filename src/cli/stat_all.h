// `tern stat --all`: the host-wide view over several running terns, one line per VM (kvm_stat for
// a whole farm; src/stats/farm_view.h). VMs are found through their API sockets: each --api-sock,
// and every socket in each --sock-dir (scanned again at every refresh, so VMs come and go).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "cli/stat_command.h"

namespace tern {

/// The VMs to show: (name, socket path) for every `socks` entry, then every Unix socket in each
/// of `dirs` (sorted by name), without repeats. A VM's name is its socket's file name without a
/// ".sock"/".socket" suffix. A directory that cannot be read becomes a ("DIR", "") entry whose
/// error is in `errors` (same index); it is not fatal for the others.
struct FarmTargets {
  std::vector<std::pair<std::string, std::string>> vms;  ///< (name, socket)
  std::vector<std::pair<std::string, std::string>> errors;  ///< (name, why)
};
[[nodiscard]] FarmTargets find_farm_targets(const std::vector<std::string>& socks,
                                            const std::vector<std::string>& dirs);

/// Runs `tern stat --all`: 0 when at least one VM answered (a VM that did not is one "error:"
/// line, not fatal), 1 when none did or no VM was found.
int run_stat_all(const StatOptions& o);

}  // namespace tern
