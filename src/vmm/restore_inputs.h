// RestoreInputs: a snapshot read and validated — state file, memory file, disks — before KVM or
// any thread is touched (the restore counterpart of BootInputs).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "config/vm_specs.h"
#include "base/fd.h"
#include "base/result.h"
#include "devices/console/console_target.h"
#include "kvm/vcpu_state.h"
#include "kvm/vm_kvm_state.h"
#include "vmm/machine_state.h"
#include "snapshot/state_file.h"
#include "vmm/devices/made_device.h"

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
  /// SnapshotLoadSpec::cpu_affinity, checked against the saved vCPU count and tern's CPUs.
  CpuAffinity cpu_affinity;
};

/// Reads and checks a snapshot: the state file (magic, format version, checksum, every section
/// present and decodable), the memory file (exists, long enough for the saved RAM layout, the
/// same pairing token as the state file — snap::check_pairing), each
/// device through the registry (a disk image: still there, same size as when saved, opened with
/// the saved options), the memory backend (anon with a vhost-user disk is refused; hugetlbfs
/// needs RAM in whole 2 MiB pages) and the console target. Errors name the file and what is wrong; nothing is built.
[[nodiscard]] Result<RestoreInputs> prepare_restore(const SnapshotLoadSpec& spec,
                                                    const std::string& console);

}  // namespace tern
