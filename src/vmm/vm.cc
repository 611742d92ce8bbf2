#include "vmm/vm.h"

#include <unistd.h>

#include "arch/x86/acpi.h"
#include "arch/x86/cpu_state.h"
#include "arch/x86/cpuid.h"
#include "arch/x86/layout.h"
#include "arch/x86/linux_loader.h"
#include "arch/x86/mptable.h"
#include "arch/x86/pvh.h"
#include "base/log.h"
#include "base/size.h"
#include "vmm/host_check.h"
#include "vmm/legacy_devices.h"
#include "vmm/pci_devices.h"
#include "vmm/devices/device_registry.h"

namespace tern {


Vm::~Vm() {
  auto inline_work = activator_.inline_scope();  // a vCPU waiting for activation must finish
  for (auto& v : vcpus_) v->stop();
  for (auto& v : vcpus_) v->join();
}

Result<std::unique_ptr<Vm>> Vm::create(const BootInputs& inputs, KeptHost kept) {
  auto vm = std::unique_ptr<Vm>(new Vm());
  TRY(vm->build(inputs, std::move(kept)));
  return vm;
}

Result<void> Vm::build(const BootInputs& in, KeptHost kept) {
  // Read by each vCPU and device worker thread as it starts (the threads start later).
  set_cpu_affinity_plan(in.config.cpu_affinity);
  if (in.config.firmware_path) return build_firmware(in, std::move(kept));
  const VmConfig& c = in.config;
  TRY(build_kvm(c.vcpus, x86::kTssAddr, x86::kIdentityMapAddr));
  // 2. Guest RAM and memslots.
  TRY(build_ram(c));

  // 3. Kernel, initrd, command line, boot_params or start_info, firmware tables, page tables.
  uint64_t entry = 0;
  uint64_t boot_struct_gpa = 0;  // boot_params (RSI) or hvm_start_info (EBX)
  uint64_t rsdp_gpa = 0;         // PVH: where start_info says the RSDP is
  const bool pvh = in.protocol == BootProtocol::kPvh;
  if (pvh) {
    auto boot = x86::load_pvh(*memory_, c.memory_bytes, in.elf, in.elf_image.bytes(), c.cmdline,
                              in.initrd.bytes());
    if (!boot) return fail("boot", boot.error().message());
    entry = boot->entry;
    boot_struct_gpa = boot->start_info_gpa;
    rsdp_gpa = boot->rsdp_gpa;
  } else {
    auto boot = x86::load_linux(*memory_, c.memory_bytes, in.kernel, c.cmdline, in.initrd.bytes());
    if (!boot) return fail("boot", boot.error().message());
    entry = boot->entry_rip;
    boot_struct_gpa = boot->boot_params_gpa;
  }
  // The MP table (for guests booted with acpi=off) has room for mptable_max_vcpus() processors in
  // the EBDA; larger guests are described by the ACPI MADT only.
  if (c.vcpus <= x86::mptable_max_vcpus()) TRY(x86::write_mptable(*memory_, c.vcpus));
  ASSIGN_OR_RETURN(x86::AcpiTablesInfo acpi, x86::write_acpi_tables(*memory_, c.vcpus));
  TERN_CHECK(!pvh || acpi.rsdp == rsdp_gpa);
  TRY(x86::write_boot_page_tables_and_gdt(*memory_));
  spdlog::info("boot protocol: {} ({}), entry {:#x}", pvh ? "PVH" : "bzImage 64-bit",
               in.protocol_reason, entry);

  // 4. Devices.
  TRY(build_devices(in.console, in.devices, std::move(kept.console)));
  // 5. vCPUs: CPUID before sregs/regs (KVM validates CR4/EFER against CPUID; add_vcpu sets it).
  for (uint32_t i = 0; i < c.vcpus; ++i) {
    ASSIGN_OR_RETURN(KvmVcpu * vcpu, add_vcpu(i, c.vcpus));
    if (pvh) {
      TRY(x86::setup_pvh_vcpu(*vcpu, static_cast<uint32_t>(entry),
                              static_cast<uint32_t>(boot_struct_gpa)));
    } else {
      TRY(x86::setup_boot_vcpu(*vcpu, entry, boot_struct_gpa));
    }
  }
  finish_build(in);
  machine_.cmdline = c.cmdline;
  machine_.kernel_path = c.kernel_path;
  machine_.initrd_path = c.initrd_path.value_or("");
  spdlog::debug("VM ready: {} vCPU(s), {} RAM, kernel entry {:#x}", c.vcpus,
                format_size(c.memory_bytes), entry);
  return {};
}

Result<void> Vm::build_ram(const VmConfig& c) {
  auto specs = x86::ram_regions(c.memory_bytes);
  ASSIGN_OR_RETURN(MemoryBackend backend,
                   choose_memory_backend(c.memory_backend, c.devices, "--memory-backend"));
  auto mem = GuestMemory::create(specs, backend);
  if (!mem) {
    if (backend == MemoryBackend::kAnon) return fail("--memory", mem.error().message());
    return tl::unexpected(mem.error());  // names the backend, the region and its size
  }
  if (backend != MemoryBackend::kAnon)
    spdlog::info("guest RAM: {} on {}{}", format_size(c.memory_bytes), memory_backend_name(backend),
                 c.memory_backend ? "" : " (automatic: a vhost-user disk maps it)");
  return add_memory(std::move(*mem));
}

void Vm::finish_build(const BootInputs& in) {
  const VmConfig& c = in.config;
  build_stats();
  // Before the first KVM_RUN (start()): every exit of the guest is counted.
  if (c.kernel_exits) {
    if (auto on = set_kernel_exits(true); !on)
      spdlog::warn("{} (the VM runs without in-kernel exit accounting)", on.error().message());
  }
  machine_.memory_bytes = c.memory_bytes;
  machine_.vcpus = c.vcpus;
  machine_.on_reboot = c.on_reboot.value_or(in.default_on_reboot);
  TERN_CHECK(in.devices.size() == c.devices.size());
  for (size_t i = 0; i < in.devices.size(); ++i)
    machine_.devices.push_back(save_device(c.devices[i], in.devices[i]));
}

Result<void> Vm::build_kvm(uint32_t vcpus, uint64_t tss_addr, uint64_t identity_map_addr) {
  // 1. KVM: capabilities first, so a host that cannot run us says why.
  auto sys = KvmSystem::open();
  if (!sys) return fail("/dev/kvm", sys.error().message());
  kvm_.emplace(std::move(*sys));
  TRY(kvm_->require(KVM_CAP_IRQCHIP, "KVM_CAP_IRQCHIP"));
  TRY(kvm_->require(KVM_CAP_USER_MEMORY, "KVM_CAP_USER_MEMORY"));
  TRY(kvm_->require(KVM_CAP_SET_TSS_ADDR, "KVM_CAP_SET_TSS_ADDR"));
  TRY(kvm_->require(KVM_CAP_PIT2, "KVM_CAP_PIT2"));
  TRY(kvm_->require(KVM_CAP_EXT_CPUID, "KVM_CAP_EXT_CPUID"));
  TRY(kvm_->require(KVM_CAP_IMMEDIATE_EXIT, "KVM_CAP_IMMEDIATE_EXIT"));
  int max_vcpus = kvm_->check_extension(KVM_CAP_MAX_VCPUS);
  if (max_vcpus > 0 && vcpus > static_cast<uint32_t>(max_vcpus))
    return fail("--cpus", std::to_string(vcpus) + " exceeds this host KVM's maximum of " +
                              std::to_string(max_vcpus));
  ASSIGN_OR_RETURN(KvmVm vm, kvm_->create_vm());
  vm_.emplace(std::move(vm));
  // Order: TSS and identity map before the irqchip and any vCPU (VMX requirement); irqchip before
  // the PIT and before vCPUs are created, so each vCPU gets an in-kernel LAPIC.
  TRY(vm_->set_tss_addr(tss_addr));
  TRY(vm_->set_identity_map_addr(identity_map_addr));
  TRY(vm_->create_irqchip());
  TRY(vm_->create_pit2());
  ASSIGN_OR_RETURN(supported_cpuid_, kvm_->supported_cpuid());
  tsc_deadline_ = kvm_->check_extension(KVM_CAP_TSC_DEADLINE_TIMER) > 0;
  return {};
}

Result<void> Vm::add_memory(GuestMemory mem) {
  memory_.emplace(std::move(mem));
  uint32_t slot = 0;
  for (const auto& r : memory_->regions())
    TRY(vm_->set_user_memory_region(slot++, r.gpa, r.size, r.host));
  return {};
}

Result<void> Vm::build_devices(const ConsoleTarget& console,
                               const std::vector<MadeDevice>& devices,
                               std::shared_ptr<ConsoleOutput> console_out, bool firmware) {
  KvmVm* kvm_vm = &*vm_;
  ASSIGN_OR_RETURN(devices_, LegacyDevices::create(
                                 console, std::move(console_out),
                                 [kvm_vm](uint32_t irq, bool level) {
                                   static RateLimit limit;
                                   auto r = kvm_vm->irq_line(irq, level);
                                   if (!r)
                                     TERN_LOG_RATELIMITED(limit, warn, "{}", r.error().message());
                                   else
                                     TERN_LOG_RATELIMITED(limit, trace, "GSI {} level {}", irq, level);
                                 },
                                 stop_));
  // PCI bus 0 (always: the DSDT describes its host bridge), one function per device in slot
  // order (disks — virtio-blk and NVMe — in --disk order, then the rng, then the interfaces).
  made_devices_ = devices;
  if (firmware) return build_firmware_devices(devices);
  TRY(devices_->attach(pio_));
  ASSIGN_OR_RETURN(pci_, PciDevices::create(*vm_, *memory_, devices, &activator_));
  TRY(pci_->attach(pio_, mmio_));
  return {};
}

Result<KvmVcpu*> Vm::add_vcpu(uint32_t id, uint32_t count) {
  VcpuThread::install_kick_handler();
  ASSIGN_OR_RETURN(KvmVcpu vcpu, vm_->create_vcpu(id));
  TRY(vcpu.set_cpuid(x86::vcpu_cpuid(supported_cpuid_, id, count, tsc_deadline_)));
  vcpus_.push_back(std::make_unique<VcpuThread>(std::move(vcpu), pio_, mmio_, stop_));
  return &vcpus_.back()->vcpu();
}

void Vm::build_stats() {
  // 6. Statistics: in-kernel stats fds are optional (older kernels, some software KVMs).
  // Device and queue counters are read from the devices at snapshot time (pci_ outlives stats_).
  stats_ = std::make_unique<VmStats>(pio_, mmio_, [this] {
    std::vector<DeviceCounters> c = pci_ ? pci_->counters() : std::vector<DeviceCounters>{};
    append_firmware_counters(c);
    return c;
  });
  stats_->set_vm_kvm_stats(KvmStatsReader::open(vm_->fd()));
  for (auto& v : vcpus_)
    stats_->add_vcpu(v->vcpu().id(), v->stats(), KvmStatsReader::open(v->vcpu().fd()));
  // In-kernel exits (off until enabled): this process's vCPU threads, NPF kinds against RAM.
  KernelExitTrace::Options trace;
  trace.tgid = ::getpid();
  for (const auto& r : memory_->regions()) trace.ram.push_back({r.gpa, r.size});
  stats_->set_kernel_exit_starter(kernel_exit_trace_starter(std::move(trace)));
}

Result<void> Vm::set_kernel_exits(bool enabled) {
  KernelExitsStats* k = stats_ ? stats_->kernel_exits() : nullptr;
  if (!k) return fail("in-kernel exit accounting", "the VM's statistics are not built");
  if (!enabled) {
    k->disable();
    return {};
  }
  return k->enable();
}

StopEvent Vm::run() {
  start();
  StopEvent e = wait_stopped();
  finish();
  return e;
}

void Vm::start() {
  // A restored VM: its kvmclock goes on from the saved value now, not from when it was built
  // (a restore may wait paused for its resume).
  release_clock();
  devices_->start();
  for (auto& v : vcpus_) v->start();
}

void Vm::release_clock() {
  if (auto r = clock_hold_.release(*vm_); !r)
    spdlog::warn("{} (the guest sees the time it was held as passed)", r.error().message());
}

StopEvent Vm::wait_stopped() { return stop_.wait(); }

void Vm::finish() {
  // Deadlock rule 1 (device_activator.h): vCPUs waiting for activation run it themselves.
  auto inline_work = activator_.inline_scope();
  for (auto& v : vcpus_) v->stop();
  for (auto& v : vcpus_) v->join();
  devices_->shutdown();
  flush_firmware_vars();
}

void Vm::flush_firmware_vars() {
  // docs/firmware.md: the variable store is on disk when the VM pauses or stops (the vCPUs are
  // out of KVM_RUN, so no write is half-way), not only once the persister's quiet time passed.
  if (!pflash_) return;
  if (auto r = pflash_->flush(); !r) spdlog::error("{}", r.error().message());
}

void Vm::pause() {
  // Deadlock rule 1 (device_activator.h): a vCPU waiting for activation never parks otherwise.
  auto inline_work = activator_.inline_scope();
  for (auto& v : vcpus_) v->request_pause();
  for (auto& v : vcpus_) v->wait_paused();
  flush_firmware_vars();
  // Every vCPU is out of KVM_RUN: the guest's time stops here (QEMU's kvmclock does the same).
  if (auto r = clock_hold_.hold(*vm_); !r)
    spdlog::warn("{} (the guest will see the pause as time passed)", r.error().message());
}

void Vm::resume() {
  // KVM_SET_CLOCK before any vCPU runs again (each is parked; VcpuThread::resume() then flags
  // the stop in its pvclock page).
  release_clock();
  for (auto& v : vcpus_) v->resume();
}

Result<void> Vm::prepare_reset() {
  // The vCPUs are joined (finish()): nothing new reaches a ring. Completed writes are made
  // durable before the devices (and their completion state) go away.
  pci_->quiesce();
  return flush_devices(machine_.devices, made_devices_);
}

KeptHost Vm::release_host() {
  KeptHost kept{devices_->console_output(), std::nullopt};
  if (pflash_) kept.firmware_vars.emplace(pflash_->release_file());
  return kept;
}

bool Vm::send_ctrl_alt_del() { return devices_->i8042().trigger_ctrl_alt_del(); }

void Vm::stop(StopEvent e) { stop_.post(std::move(e)); }

}  // namespace tern
