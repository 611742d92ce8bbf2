// RestoreInputs: a snapshot read and validated — state file, memory file, disks — before KVM or
// any thread is touched (the restore counterpart of BootInputs).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/fd.h"
#include "base/result.h"
#include "config/vm_specs.h"
#include "devices/console/console_target.h"
#include "kvm/vcpu_state.h"
#include "kvm/vm_kvm_state.h"
#include "snapshot/state_file.h"
#include "vmm/boot_inputs.h"
#include "vmm/devices/made_device.h"
#include "vmm/machine_state.h"

namespace tern {

struct RestoreInputs {
  snap::StateFile state;          ///< All sections (device sections are decoded by the devices).
  snap::MachineState machine;     ///< The VM to rebuild.
  VmKvmState vm_kvm;              ///< PIC, IOAPIC, PIT, kvmclock.
  std::vector<VcpuState> vcpus;   ///< One per vCPU, in id order.
  ConsoleTarget console;
  std::vector<MadeDevice> devices;  ///< Re-made, same order and names as saved.
  UniqueFd mem_fd;                ///< The memory file, open read-only.
  /// What backs the restored RAM: SnapshotLoadSpec::memory_backend, else chosen from the
  /// restored devices as at boot (choose_memory_backend). kAnon maps the memory file
  /// copy-on-write; memfd / hugetlbfs read it into shared RAM a vhost-user back-end can map.
  MemoryBackend memory_backend = MemoryBackend::kAnon;
  /// A firmware-booted snapshot (machine.firmware): the firmware image read again and checked
  /// against the saved size and crc32, its variable store opened, the config a reset rebuilds
  /// the VM from (VmMachine keeps it when the restored VM restarts on reboot). Null otherwise.
  std::unique_ptr<BootInputs> firmware_boot;
  /// What a guest reset does in the restored VM: SnapshotLoadSpec::on_reboot, else the saved one.
  OnReboot on_reboot = OnReboot::kExit;
  /// SnapshotLoadSpec::cpu_affinity, checked against the saved vCPU count and tern's CPUs.
  CpuAffinity cpu_affinity;
};

/// Reads and checks a snapshot: the state file (magic, format version, checksum, every section
/// present and decodable), the memory file (exists, long enough for the saved RAM layout, the
/// same pairing token as the state file — snap::check_pairing), each
/// device through the registry (a disk image: still there, same size as when saved, opened with
/// the saved options), the memory backend (anon with a vhost-user disk is refused; hugetlbfs
/// needs RAM in whole 2 MiB pages) and the console target. A firmware-booted snapshot: its
/// chipset, INTx router and fw_cfg sections (and pflash with a variable store) present, the
/// firmware file there with the saved size and crc32 (refused naming the file otherwise), the
/// variable store opened and locked. --on-reboot restart of a direct-boot snapshot is refused.
/// Errors name the file and what is wrong; nothing is built.
[[nodiscard]] Result<RestoreInputs> prepare_restore(const SnapshotLoadSpec& spec,
                                                    const std::string& console);

}  // namespace tern
