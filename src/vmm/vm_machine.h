// VmMachine: the real Machine — validates a VmConfig, checks the host, builds a Vm.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <tl/expected.hpp>

#include "api/api_request.h"
#include "base/result.h"
#include "vmm/machine.h"
#include "vmm/vm_config.h"

namespace tern {

/// Why a VM could not be built: the error (naming the field) and the `tern run` exit status that
/// goes with it (1: bad input or setup failure, 2: this host cannot run guests).
struct StartFailure {
  int exit_status = 1;
  Error error;
};

/// Validates `config` (prepare_boot()), checks /dev/kvm and VMX/SVM, applies `drives` and builds
/// the Vm. Nothing runs until Machine::start().
[[nodiscard]] tl::expected<std::unique_ptr<Machine>, StartFailure> create_vm_machine(
    const VmConfig& config, const std::vector<DriveSpec>& drives);

/// Checks the snapshot (prepare_restore()), then the host, and rebuilds the VM it describes with
/// its state applied; the guest console goes to `console`. Nothing runs until Machine::start().
[[nodiscard]] tl::expected<std::unique_ptr<Machine>, StartFailure> create_restored_machine(
    const SnapshotLoadSpec& spec, const std::string& console);

/// Puts the validated drives into `config.disks` (the root device first, as /dev/vda, adding
/// root=/dev/vda or root=PARTUUID=... to the command line when it names no root=).
[[nodiscard]] Result<void> apply_drives(const std::vector<DriveSpec>& drives, VmConfig& config);

}  // namespace tern
