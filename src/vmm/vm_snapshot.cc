// Vm save and restore (issue #5): what is saved, and the order KVM needs it applied in.
#include <unistd.h>

#include <chrono>

#include "arch/x86/layout.h"
#include "base/log.h"
#include "base/size.h"
#include "firmware/firmware_image.h"
#include "kvm/vcpu_state.h"
#include "kvm/vm_kvm_state.h"
#include "snapshot/sections.h"
#include "snapshot/snapshot_pair.h"
#include "vmm/devices/device_registry.h"
#include "vmm/legacy_devices.h"
#include "vmm/pci_devices.h"
#include "vmm/vm.h"

namespace tern {

namespace {

snap::StateSection make_section(uint32_t id, uint32_t version, snap::ByteWriter& w) {
  return snap::StateSection{id, version, w.take()};
}

// Unquiesces the PCI devices when the save is over, whatever happened.
struct Unquiesce {
  PciDevices* pci;
  ~Unquiesce() { pci->unquiesce(); }
};

// The memory file read into shared RAM of `in.memory_backend`, with a progress line each second
// (a large guest takes a while) and one at the end.
Result<GuestMemory> read_memory_file(std::span<const RegionSpec> specs, const RestoreInputs& in) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  auto last = t0;
  auto progress = [&](uint64_t done, uint64_t total) {
    auto now = Clock::now();
    if (now - last < std::chrono::seconds(1)) return;
    last = now;
    spdlog::info("restore: reading guest RAM into {}: {} of {}", memory_backend_name(in.memory_backend),
                 format_size(done), format_size(total));
  };
  auto mem = GuestMemory::create_from_file(specs, in.mem_fd.borrow(), in.memory_backend, progress);
  if (!mem) return fail("snapshot memory file", mem.error().message());
  spdlog::info("restore: guest RAM ({}) read into {} in {:.3f} s", format_size(mem->total_size()),
               memory_backend_name(in.memory_backend),
               std::chrono::duration<double>(Clock::now() - t0).count());
  return mem;
}

}  // namespace

Result<std::unique_ptr<Vm>> Vm::restore(const RestoreInputs& inputs) {
  auto vm = std::unique_ptr<Vm>(new Vm());
  TRY(vm->build_restored(inputs));
  return vm;
}

// Restore order (each step's reason next to it). Nothing here runs a vCPU: their threads start at
// the first resume, after every step below.
Result<void> Vm::build_restored(const RestoreInputs& in) {
  const snap::MachineState& m = in.machine;
  set_cpu_affinity_plan(in.cpu_affinity);  // --cpu-affinity of the restore, not the save
  // 1. KVM VM with its in-kernel irqchip and PIT, exactly as a boot creates them.
  spdlog::debug("restore: KVM VM");
  //    A firmware boot's KVM pages sit where QEMU puts them (the firmware owns the top 16 MiB
  //    below 4 GiB), as Vm::build_firmware() places them.
  const bool fw = in.firmware_boot != nullptr;
  TRY(build_kvm(m.vcpus, fw ? firmware::kFirmwareTssAddr : x86::kTssAddr,
                fw ? firmware::kFirmwareIdentityMapAddr : x86::kIdentityMapAddr));
  if (fw) TRY(kvm_->require(KVM_CAP_READONLY_MEM, "KVM_CAP_READONLY_MEM"));
  spdlog::debug("restore: memory");
  // 2. RAM at the same guest-physical layout. anon: the memory file mapped MAP_PRIVATE; pages
  //    are read on first touch, so this costs the same for 128 MiB and 128 GiB. memfd /
  //    hugetlbfs (a vhost-user back-end maps guest RAM): the file's data read into new shared
  //    RAM, which costs a read of the non-zero RAM (progress logged each second).
  auto specs = x86::ram_regions(m.memory_bytes);
  Result<GuestMemory> mem = fail("restore", "no memory");
  if (in.memory_backend == MemoryBackend::kAnon) {
    mem = GuestMemory::create_from_file(specs, in.mem_fd.borrow());
    if (!mem) return fail("snapshot memory file", mem.error().message());
    ASSIGN_OR_RETURN(
        memory_backing_,
        snap::protected_file(in.mem_fd.get(), "the memory file this VM was restored from",
                             /*memory_target_ok=*/true));
  } else {
    mem = read_memory_file(specs, in);
    if (!mem) return tl::unexpected(mem.error());
  }
  TRY(add_memory(std::move(*mem)));
  // 3. VM-wide KVM state: PIC, IOAPIC and PIT, then kvmclock. KVM_SET_CLOCK must come before any
  //    vCPU runs (the guest's kvmclock pages are computed from it on first entry).
  spdlog::debug("restore: irqchip, PIT, kvmclock {} ns (saved flags {:#x})", in.vm_kvm.clock.clock,
                in.vm_kvm.clock.flags);
  TRY(restore_vm_kvm_state(*vm_, in.vm_kvm));
  clock_hold_.hold_at(in.vm_kvm.clock.clock);  // set again at start(): the wait is not guest time
  spdlog::debug("restore: devices");
  // 4. Devices, created as at boot; the legacy ones get their registers now (their IRQ line
  //    levels come back with the irqchip state above, not by driving the lines again).
  //    Firmware boots: the image mapped read-only again from the file the snapshot names (the
  //    guest may be running it; prepare_restore checked its size and crc32), the chipset, fw_cfg
  //    with its items rebuilt from the config, the pflash store; their state follows below.
  if (fw) {
    TRY(rebuild_firmware(in));
  } else {
    TRY(build_devices(in.console, in.devices));
  }
  const snap::StateSection* legacy = in.state.find(snap::kLegacySection);
  const snap::StateSection* pci = in.state.find(snap::kPciSection);
  TERN_CHECK(legacy && pci);  // prepare_restore() checked
  snap::ByteReader lr(legacy->data, "snapshot: legacy devices section");
  TRY(devices_->restore_state(lr));
  // 5. vCPUs: CPUID first (KVM checks MSRs and XSAVE state against it), then the saved state in
  //    restore_vcpu_state()'s order (kvm/vcpu_state.cc: sregs before LAPIC, LAPIC before MSRs,
  //    TSC before TSC_DEADLINE, events last).
  spdlog::debug("restore: vCPUs");
  for (uint32_t i = 0; i < m.vcpus; ++i) {
    ASSIGN_OR_RETURN(KvmVcpu * vcpu, add_vcpu(i, m.vcpus));
    if (auto ok = restore_vcpu_state(*vcpu, in.vcpus[i]); !ok)
      return fail("snapshot: vCPU " + std::to_string(i), ok.error().message());
    spdlog::debug("restore: vCPU {}: {}", i, vcpu_time_summary(in.vcpus[i]));
  }
  // 6. PCI last: restoring a virtio-pci transport re-activates its device, whose workers start
  //    serving the rings at once (a request the guest queued before the save completes now) and
  //    may inject an MSI. That must land in a LAPIC already restored (KVM_SET_LAPIC would
  //    overwrite its IRR), so after step 5. Also re-places BARs (ioeventfds) and MSI-X routes.
  //    The chipset, fw_cfg and pflash before PCI too: the INTx router must hold the saved levels
  //    before a restored function drives its line (a lower by one source must see the others').
  if (fw) TRY(restore_firmware_state(in.state));
  snap::ByteReader pr(pci->data, "snapshot: PCI devices section");
  spdlog::debug("restore: PCI devices");
  TRY(pci_->restore_state(pr));
  build_stats();
  const std::optional<snap::SavedFirmware> firmware = std::move(machine_.firmware);
  machine_ = m;
  machine_.on_reboot = in.on_reboot;
  TERN_CHECK(firmware == m.firmware);  // map_firmware() recorded the file prepare_restore checked
  spdlog::debug("VM restored: {} vCPU(s), {} RAM", m.vcpus, format_size(m.memory_bytes));
  return {};
}

Result<void> Vm::rebuild_firmware(const RestoreInputs& in) {
  const BootInputs& boot = *in.firmware_boot;
  TRY(map_firmware(boot, std::nullopt, /*restored=*/true));
  TRY(build_devices(in.console, in.devices, nullptr, /*firmware=*/true));
  return attach_firmware_io(boot);
}

namespace {

// Applies section `id` with `restore`; every byte must be consumed.
template <class Restore>
Result<void> restore_section(const snap::StateFile& f, uint32_t id, const char* name,
                             Restore restore) {
  const snap::StateSection* s = f.find(id);
  TERN_CHECK(s);  // prepare_restore() checked
  snap::ByteReader r(s->data, std::string("snapshot: ") + name + " section");
  TRY(restore(r));
  return r.expect_end();
}

}  // namespace

Result<void> Vm::restore_firmware_state(const snap::StateFile& f) {
  TRY(restore_section(f, snap::kChipsetSection, "chipset",
                      [&](snap::ByteReader& r) { return chipset_->restore_state(r); }));
  IntxRouter* router = pci_->intx_router();
  TERN_CHECK(router);  // use_piix_intx() in build_firmware_devices()
  TRY(restore_section(f, snap::kIntxRouterSection, "INTx router",
                      [&](snap::ByteReader& r) { return router->restore_state(r); }));
  TRY(restore_section(f, snap::kFwCfgSection, "fw_cfg",
                      [&](snap::ByteReader& r) { return fw_cfg_->restore_state(r); }));
  if (pflash_) {
    TRY(restore_section(f, snap::kPflashSection, "pflash",
                        [&](snap::ByteReader& r) { return pflash_->restore_state(r); }));
  }
  return {};
}

Result<snap::StateFile> Vm::collect_state() {
  snap::StateFile f;
  f.tern_version = TERN_VERSION;
  snap::ByteWriter w;
  snap::encode_machine_state(w, machine_);
  f.sections.push_back(make_section(snap::kMachineSection, snap::kMachineSectionVersion, w));

  ASSIGN_OR_RETURN(auto vm_state, save_vm_kvm_state(*vm_));
  // A paused VM's guest time stands at the held value (KVM's kvmclock runs on meanwhile).
  if (auto held = clock_hold_.held_ns()) vm_state.clock.clock = *held;
  spdlog::debug("snapshot: kvmclock {} ns (flags {:#x})", vm_state.clock.clock, vm_state.clock.flags);
  encode_vm_kvm_state(w, vm_state);
  f.sections.push_back(make_section(snap::kVmKvmSection, snap::kVmKvmSectionVersion, w));

  if (msr_list_.empty() && !vcpus_.empty()) {
    ASSIGN_OR_RETURN(msr_list_, snapshot_msr_list(*kvm_, vcpus_.front()->vcpu()));
  }
  for (auto& v : vcpus_) {
    ASSIGN_OR_RETURN(auto s, save_vcpu_state(v->vcpu(), msr_list_));
    spdlog::debug("snapshot: vCPU {}: {}", v->vcpu().id(), vcpu_time_summary(s));
    encode_vcpu_state(w, s);
    f.sections.push_back(
        make_section(snap::kVcpuBase + v->vcpu().id(), snap::kVcpuSectionVersion, w));
  }
  devices_->save_state(w);
  f.sections.push_back(make_section(snap::kLegacySection, snap::kLegacySectionVersion, w));
  pci_->save_state(w);
  f.sections.push_back(make_section(snap::kPciSection, snap::kPciSectionVersion, w));
  if (chipset_) {
    // A firmware boot: the platform the firmware programmed (docs/snapshots.md). The firmware
    // image is not saved: machine_.firmware names it, and a restore maps that file again.
    chipset_->save_state(w);
    f.sections.push_back(make_section(snap::kChipsetSection, snap::kChipsetSectionVersion, w));
    pci_->intx_router()->save_state(w);
    f.sections.push_back(
        make_section(snap::kIntxRouterSection, snap::kIntxRouterSectionVersion, w));
    fw_cfg_->save_state(w);
    f.sections.push_back(make_section(snap::kFwCfgSection, snap::kFwCfgSectionVersion, w));
    if (pflash_) {
      pflash_->save_state(w);
      f.sections.push_back(make_section(snap::kPflashSection, snap::kPflashSectionVersion, w));
    }
  }
  return f;
}

Result<void> Vm::check_snapshot_paths(const SnapshotCreateSpec& spec) const {
  ASSIGN_OR_RETURN(auto files, device_protected_files(machine_.devices, made_devices_));
  if (memory_backing_) files.push_back(*memory_backing_);
  return snap::check_snapshot_targets(spec.snapshot_path, spec.mem_file_path, files);
}

Result<SnapshotReport> Vm::save_snapshot(const SnapshotCreateSpec& spec,
                                         const SaveProgress& progress,
                                         const std::atomic<bool>& cancel) {
  auto t0 = std::chrono::steady_clock::now();
  for (auto& v : vcpus_) {
    VcpuThreadState s = v->state();
    TERN_CHECK(s != VcpuThreadState::kRunning && s != VcpuThreadState::kPausing);
  }
  // Before anything is touched: the targets must not be the VM's own files or each other.
  TRY(check_snapshot_paths(spec));
  // A consistent point: vCPUs are parked outside KVM_RUN (any PIO/MMIO they had pending was
  // completed by the immediate_exit re-entry), and no disk request is in flight.
  pci_->quiesce();
  Unquiesce unquiesce{pci_.get()};
  ASSIGN_OR_RETURN(auto state, collect_state());
  uint64_t state_bytes = 0;
  for (const auto& s : state.sections) state_bytes += s.data.size();

  snap::PairSaveOptions o;
  o.memory.direct = spec.direct;
  o.memory.rate_limit_bytes_per_s = spec.rate_limit_bytes_per_s;
  o.memory.progress = progress;
  o.memory.cancel = &cancel;
  // Every write the guest saw complete is durable before the new pair is committed (as
  // Firecracker flushes its block devices on snapshot); a failed flush fails the save.
  o.before_commit = [this]() -> Result<void> { return flush_devices(machine_.devices, made_devices_); };
  ASSIGN_OR_RETURN(auto mem, snap::save_snapshot_pair(*memory_, std::move(state),
                                                      spec.snapshot_path, spec.mem_file_path, o));
  SnapshotReport r;
  r.total_bytes = mem.total_bytes;
  r.written_bytes = mem.written_bytes;
  r.state_bytes = state_bytes;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  spdlog::info("snapshot: {} of RAM ({} written) to {} in {:.3f} s", format_size(r.total_bytes),
               format_size(r.written_bytes), spec.mem_file_path, r.seconds);
  return r;
}

}  // namespace tern
