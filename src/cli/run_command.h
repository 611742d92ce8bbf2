// `tern run`: boot a Linux kernel from the command line and wait for the guest to stop.
#pragma once

#include <CLI/CLI.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "vmm/vm_resources.h"

namespace tern {

/// Raw `tern run` options as typed by the user (validated by run_vm()).
struct RunOptions {
  std::string kernel;
  std::string firmware;       ///< --firmware PATH (instead of --kernel).
  std::string firmware_vars;  ///< --firmware-vars PATH (UEFI variable store).
  std::string boot_protocol = "auto";  ///< --boot-protocol: auto, pvh, bzimage.
  std::string on_reboot;  ///< --on-reboot exit|restart; empty: the boot's default.
  std::string initrd;
  std::string cmdline;
  bool cmdline_given = false;
  std::string memory = "512M";
  std::string cpu_affinity;    ///< --cpu-affinity vcpu0=0-1,io=0; empty: no pinning.
  std::string memory_backend;  ///< --memory-backend anon|memfd|hugetlbfs; empty: automatic.
  uint32_t cpus = 1;
  std::string console = "stdio";
  bool stats_on_exit = false;  ///< --stats-on-exit: print a statistics summary on stderr at the end
  bool kernel_exits = false;   ///< --kernel-exits: in-kernel exit accounting from the first KVM_RUN
  std::string api_sock;  ///< --api-sock PATH: also serve the control API for this VM.
  std::vector<std::string> disks;  ///< --disk values as typed (vmm/disk_option.h), in order.
  /// Each device kind's option given (--rng[=SPEC], device_surfaces.h): option → SPEC as
  /// typed ("" when given alone).
  std::map<std::string, std::string, std::less<>> devices;
  /// Each keyed list kind's repeatable option (--net SPEC, device_surfaces.h): option → the
  /// SPECs in order (the i-th is device kCliIdPrefix + i: "net0", "net1", ...).
  std::map<std::string, std::vector<std::string>, std::less<>> keyed_devices;
};

/// Adds the `run` subcommand and its options to `app`, storing them in `opts`.
CLI::App* add_run_command(CLI::App& app, RunOptions& opts);

/// The configuration `opts` describe (the one VmResources: GET /machine-config and /vm/config
/// over --api-sock report it; each --disk is drive "vda", "vdb", ...). Errors name the option
/// (--memory, --disk field, a device option's field, "--net queues" over --cpus); the rest is
/// checked when the VM is built.
[[nodiscard]] Result<VmResources> run_resources(const RunOptions& opts);

/// Validates `opts`, builds and runs the VM. Returns the documented exit status
/// (src/vmm/exit_status.h) and prints a one-line reason on stderr for every non-zero status.
int run_vm(const RunOptions& opts);

}  // namespace tern
