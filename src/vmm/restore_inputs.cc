#include "vmm/restore_inputs.h"

#include "arch/x86/layout.h"
#include "base/log.h"
#include "base/size.h"
#include "snapshot/memory_file.h"
#include "snapshot/sections.h"
#include "snapshot/snapshot_pair.h"
#include "vmm/devices/device_registry.h"
#include "vmm/boot_inputs.h"
#include "vmm/host_check.h"

namespace tern {

namespace {

// The section `id` with `version`, or an error naming it.
Result<const snap::StateSection*> section(const snap::StateFile& f, uint32_t id, uint32_t version,
                                          const std::string& name, const std::string& path) {
  const snap::StateSection* s = f.find(id);
  if (!s) return fail("snapshot", path + ": no " + name + " section");
  if (s->version != version)
    return fail("snapshot", path + ": " + name + " section version " + std::to_string(s->version) +
                                " (this tern reads version " + std::to_string(version) + ")");
  return s;
}

}  // namespace

Result<RestoreInputs> prepare_restore(const SnapshotLoadSpec& spec, const std::string& console) {
  RestoreInputs in;
  const std::string& path = spec.snapshot_path;
  auto state = snap::read_state_file(path);
  if (!state) {
    if (state.error().errnum != 0) return fail("snapshot state file", state.error().message());
    return tl::unexpected(state.error());
  }
  in.state = std::move(*state);

  // The machine section: version 6, or an older one (5: before disk formats; 4: before
  // notification tuning; 3: before
  // disk locking; 2: before vhost-user; 1: before the device registry, disks only).
  const snap::StateSection* ms = in.state.find(snap::kMachineSection);
  if (ms && ms->version >= 1 && ms->version < snap::kMachineSectionVersion) {
    snap::ByteReader mr(ms->data, path + ": machine section");
    ASSIGN_OR_RETURN(in.machine, snap::decode_machine_state_version(mr, ms->version));
  } else {
    ASSIGN_OR_RETURN(ms, section(in.state, snap::kMachineSection, snap::kMachineSectionVersion,
                                 "machine", path));
    snap::ByteReader mr(ms->data, path + ": machine section");
    ASSIGN_OR_RETURN(in.machine, snap::decode_machine_state(mr));
  }
  uint64_t limit = host_memory_limit();
  if (in.machine.memory_bytes > limit)
    return fail("snapshot", path + ": the guest has " + format_size(in.machine.memory_bytes) +
                                " of RAM, more than this host can back (" + format_size(limit) +
                                ")");

  ASSIGN_OR_RETURN(
      auto* ks, section(in.state, snap::kVmKvmSection, snap::kVmKvmSectionVersion, "KVM VM", path));
  snap::ByteReader kr(ks->data, path + ": KVM VM section");
  ASSIGN_OR_RETURN(in.vm_kvm, decode_vm_kvm_state(kr));
  TRY(kr.expect_end());
  for (uint32_t i = 0; i < in.machine.vcpus; ++i) {
    std::string name = "vCPU " + std::to_string(i);
    ASSIGN_OR_RETURN(auto* vs,
                     section(in.state, snap::kVcpuBase + i, snap::kVcpuSectionVersion, name, path));
    snap::ByteReader vr(vs->data, path + ": " + name + " section");
    ASSIGN_OR_RETURN(auto v, decode_vcpu_state(vr));
    TRY(vr.expect_end());
    in.vcpus.push_back(std::move(v));
  }
  TRY(section(in.state, snap::kLegacySection, snap::kLegacySectionVersion, "legacy devices", path));
  TRY(section(in.state, snap::kPciSection, snap::kPciSectionVersion, "PCI devices", path));

  // The memory file: long enough for the saved layout (a short file would fault the guest later)
  // and from the same save as the state file (pairing token, format 1.1; 1.0 pairs have none).
  ASSIGN_OR_RETURN(auto state_token, snap::state_pairing_token(in.state, path));
  auto specs = x86::ram_regions(in.machine.memory_bytes);
  bool used_previous = false;
  ASSIGN_OR_RETURN(auto mem, snap::open_paired_memory_file(state_token, path, spec.mem_file_path,
                                                           specs, &used_previous));
  if (used_previous)
    spdlog::warn(
        "restore: {} is from a later save that did not finish; restoring {} with the "
        "memory file saved with it, {}",
        spec.mem_file_path, path, snap::previous_memory_path(spec.mem_file_path));
  in.mem_fd = std::move(mem.fd);

  // The backend: the operator's, else what the restored devices need (a vhost-user disk: memfd).
  // Not saved in the snapshot: it is a host choice (huge pages reserved on this host or not),
  // and the guest cannot tell.
  std::vector<DeviceSpec> saved_specs;
  for (const auto& d : in.machine.devices) saved_specs.push_back(d.spec);
  ASSIGN_OR_RETURN(in.memory_backend, choose_memory_backend(spec.memory_backend, saved_specs,
                                                            "--memory-backend"));
  if (in.memory_backend == MemoryBackend::kHugetlbfs && in.machine.memory_bytes % kHugePageSize)
    return fail("--memory-backend hugetlbfs",
                "the snapshot's guest RAM (" + format_size(in.machine.memory_bytes) +
                    ") is not a multiple of 2 MiB");

  if (!spec.cpu_affinity.empty()) {
    ASSIGN_OR_RETURN(CpuList allowed, process_allowed_cpus());
    TRY(check_cpu_affinity(spec.cpu_affinity, in.machine.vcpus, allowed, "cpu_affinity"));
  }
  in.cpu_affinity = spec.cpu_affinity;

  auto target = ConsoleTarget::parse(console, "--console");
  if (!target) return tl::unexpected(target.error());
  in.console = *target;

  // Devices: each kind re-made from its saved spec and checked (a disk's image: same size).
  ASSIGN_OR_RETURN(in.devices, make_restored_devices(in.machine.devices));
  return in;
}

}  // namespace tern
