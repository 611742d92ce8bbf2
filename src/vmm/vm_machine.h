// VmMachine: the real Machine — validates a VmConfig (or a snapshot), checks the host, builds a Vm.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <tl/expected.hpp>

#include "config/vm_specs.h"
#include "base/result.h"
#include "vmm/machine.h"
#include "vmm/vm_config.h"
#include "vmm/vm_resources.h"

namespace tern {

/// Why a VM could not be built: the error (naming the field) and the `tern run` exit status that
/// goes with it (1: bad input or setup failure, 2: this host cannot run guests).
struct StartFailure {
  int exit_status = 1;
  Error error;
};

/// Validates `config` (prepare_boot(): errors name the field), checks /dev/kvm and VMX/SVM and
/// builds the Vm. Nothing runs until Machine::start().
[[nodiscard]] tl::expected<std::unique_ptr<Machine>, StartFailure> create_vm_machine(
    const VmConfig& config);

/// create_vm_machine() without the VMX/SVM check: for kvm tests, whose tiny guests run on a
/// software KVM too (tests/kvm/reboot_in_place_test.cc).
[[nodiscard]] tl::expected<std::unique_ptr<Machine>, StartFailure> create_vm_machine_on_any_kvm(
    const VmConfig& config);

/// Checks the snapshot (prepare_restore()), then the host, and rebuilds the VM it describes with
/// its state applied; the guest console goes to `resources.console`. On success `resources`
/// becomes the snapshot's configuration (VmResources::from_machine_state). Nothing runs until
/// Machine::start().
[[nodiscard]] tl::expected<std::unique_ptr<Machine>, StartFailure> create_restored_machine(
    const SnapshotLoadSpec& spec, VmResources& resources);

/// create_restored_machine() without the VMX/SVM check: for kvm tests
/// (tests/kvm/firmware_snapshot_test.cc).
[[nodiscard]] tl::expected<std::unique_ptr<Machine>, StartFailure>
create_restored_machine_on_any_kvm(const SnapshotLoadSpec& spec, VmResources& resources);

}  // namespace tern
