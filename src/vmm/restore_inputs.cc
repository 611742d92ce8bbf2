#include "vmm/restore_inputs.h"

#include "arch/x86/layout.h"
#include "base/log.h"
#include "base/size.h"
#include "firmware/firmware_image.h"
#include "snapshot/memory_file.h"
#include "snapshot/sections.h"
#include "snapshot/snapshot_pair.h"
#include "vmm/boot_inputs.h"
#include "vmm/devices/device_registry.h"
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

struct FirmwareSection {
  uint32_t id;
  uint32_t version;
  const char* name;
};
constexpr FirmwareSection kFirmwareSections[] = {
    {snap::kChipsetSection, snap::kChipsetSectionVersion, "chipset"},
    {snap::kIntxRouterSection, snap::kIntxRouterSectionVersion, "INTx router"},
    {snap::kFwCfgSection, snap::kFwCfgSectionVersion, "fw_cfg"},
    {snap::kPflashSection, snap::kPflashSectionVersion, "pflash"},
};

// The firmware sections: each present (pflash only with a variable store) with its version,
// none in a direct boot's snapshot.
Result<void> check_firmware_sections(const snap::StateFile& f, const snap::MachineState& m,
                                     const std::string& path) {
  for (const FirmwareSection& s : kFirmwareSections) {
    const bool wanted =
        m.firmware && (s.id != snap::kPflashSection || !m.firmware->vars_path.empty());
    if (wanted) {
      TRY(section(f, s.id, s.version, s.name, path));
    } else if (f.find(s.id)) {
      return fail("snapshot", path + ": a " + s.name + " section in the snapshot of a VM " +
                                  (m.firmware ? "without a firmware variable store"
                                              : "booted without --firmware"));
    }
  }
  return {};
}

// The saved VM's firmware read again (the guest may be running it: the very bytes are needed)
// and its variable store opened; the VmConfig a reset rebuilds the VM from.
Result<std::unique_ptr<BootInputs>> prepare_firmware_restore(const snap::MachineState& m,
                                                             const ConsoleTarget& console,
                                                             const std::string& path) {
  const snap::SavedFirmware& f = *m.firmware;
  auto boot = std::make_unique<BootInputs>();
  VmConfig& c = boot->config;
  c.vcpus = m.vcpus;
  c.memory_bytes = m.memory_bytes;
  c.firmware_path = f.path;
  if (!f.vars_path.empty()) c.firmware_vars_path = f.vars_path;
  c.console = console.to_string();
  for (const SavedDevice& d : m.devices) c.devices.push_back(d.spec);
  if (auto ok = prepare_firmware(c, *boot); !ok)
    return fail("snapshot", path + ": the firmware of the saved VM: " + ok.error().message());
  const uint64_t size = boot->firmware_info.size;
  const uint32_t crc = firmware::image_crc32(boot->firmware.bytes());
  if (size != f.size || crc != f.crc32)
    return fail("snapshot", path + ": the firmware file " + f.path +
                                " changed since the save (now " + std::to_string(size) +
                                " bytes, crc32 " + fmt::format("{:#010x}", crc) + "; saved " +
                                std::to_string(f.size) + " bytes, crc32 " +
                                fmt::format("{:#010x}", f.crc32) +
                                "): a restore needs the image the guest was running");
  boot->console = console;
  boot->default_on_reboot = OnReboot::kRestart;
  return boot;
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

  // The machine section: version 7, or an older one (6: before on_reboot and firmware; 5: before
  // disk formats; 4: before
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
  TRY(check_firmware_sections(in.state, in.machine, path));
  in.on_reboot = spec.on_reboot.value_or(in.machine.on_reboot);
  if (in.on_reboot == OnReboot::kRestart && !in.machine.firmware) {
    if (spec.on_reboot)
      return fail("on_reboot", "restart needs a firmware-booted snapshot (" + path +
                                   " is of a direct kernel boot, whose kernel a restore does not "
                                   "load again)");
    in.on_reboot = OnReboot::kExit;
    spdlog::info(
        "restore: the saved VM restarted on a guest reboot; restored, it exits (a "
        "direct kernel boot's kernel is not loaded again)");
  }

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
  if (in.machine.firmware) {
    ASSIGN_OR_RETURN(in.firmware_boot, prepare_firmware_restore(in.machine, in.console, path));
  }
  return in;
}

}  // namespace tern
