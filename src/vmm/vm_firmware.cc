// Vm::build for a firmware boot (--firmware): the machine a PC's firmware expects instead of a
// Linux kernel's entry state. No kernel loader, boot_params, MP table or ACPI tables in RAM: the
// firmware builds its own view of the machine (from fw_cfg and the chipset when present).
#include <algorithm>
#include <cstring>

#include "arch/x86/cpuid.h"
#include "arch/x86/layout.h"
#include "arch/x86/reset_state.h"
#include "base/log.h"
#include "base/size.h"
#include "devices/legacy/cmos_memory.h"
#include "devices/pci/piix4_pm.h"
#include "firmware/firmware_image.h"
#include "firmware/fw_cfg/fw_cfg_contents.h"
#include "vmm/legacy_devices.h"
#include "vmm/devices/device_registry.h"
#include "vmm/pci_devices.h"
#include "vmm/vm.h"

namespace tern {

namespace {

// Memslots past RAM's (0, 1): the code image and OVMF's variable store (its ROMD slot).
constexpr uint32_t kFirmwareCodeSlot = 8;
constexpr uint32_t kFirmwareVarsSlot = 9;

using x86::kSeaBiosPmBase;

/// The least RAM a firmware boot gets: SeaBIOS and OVMF need RAM above 1 MiB for themselves.
constexpr uint64_t kMinFirmwareRam = 32 * MiB;

/// CPUID.01H:EAX (family, model, stepping) from `cpuid`, what EDX holds after RESET; 0x600 (the
/// family-6 value KVM itself uses) when the leaf is missing.
uint32_t cpuid_signature(const std::vector<kvm_cpuid_entry2>& cpuid) {
  for (const auto& e : cpuid)
    if (e.function == 1 && e.index == 0) return e.eax;
  return 0x600;
}

}  // namespace

Result<void> Vm::build_firmware(const BootInputs& in, KeptHost kept) {
  const VmConfig& c = in.config;
  if (c.memory_bytes < kMinFirmwareRam)
    return fail("--memory", format_size(c.memory_bytes) + " is too little for --firmware (at least " +
                                format_size(kMinFirmwareRam) + ")");
  // 1. KVM, with its private pages where QEMU puts them: the firmware owns [0xFF000000, 4 GiB).
  TRY(build_kvm(c.vcpus, firmware::kFirmwareTssAddr, firmware::kFirmwareIdentityMapAddr));
  TRY(kvm_->require(KVM_CAP_READONLY_MEM, "KVM_CAP_READONLY_MEM"));

  // 2. Guest RAM, as for a kernel boot (the same e820 layout: RAM below 3 GiB, the rest above 4).
  TRY(build_ram(c));

  // 3. The image, read-only below 4 GiB, and its isa-bios copy below 1 MiB.
  TRY(map_firmware(in, std::move(kept.firmware_vars)));

  // 4. Devices: the legacy ones (COM1, i8042, CMOS, PM) and PCI bus 0; fw_cfg describes them.
  TRY(build_devices(in.console, in.devices, std::move(kept.console), /*firmware=*/true));
  // The PC convention for the memory size, which SeaBIOS reads before it asks fw_cfg.
  CmosMemoryLayout cmos;
  cmos.below_4g = std::min(c.memory_bytes, x86::kHoleStart);
  cmos.above_4g = c.memory_bytes - cmos.below_4g;
  cmos.cpus = c.vcpus;
  set_cmos_memory(devices_->cmos(), cmos);
  TRY(attach_firmware_io(in));

  // 5. vCPUs in the RESET state. KVM ordering (reset_state.h): the irqchip exists (build_kvm), so
  // each vCPU has an in-kernel LAPIC; CPUID (add_vcpu) before sregs; vCPU 0 is the BSP and runs
  // the reset vector, the others wait for the firmware's INIT-SIPI-SIPI.
  const uint32_t signature = cpuid_signature(supported_cpuid_);
  for (uint32_t i = 0; i < c.vcpus; ++i) {
    ASSIGN_OR_RETURN(KvmVcpu * vcpu, add_vcpu(i, c.vcpus));
    TRY(x86::setup_reset_vcpu(*vcpu, /*bsp=*/i == 0, signature));
  }
  finish_build(in);
  spdlog::info("firmware boot: {} ({}, {}) at {:#x}..4 GiB, {} vCPU(s), {} RAM", *c.firmware_path,
               firmware::firmware_kind_name(in.firmware_info.kind),
               format_size(in.firmware_info.size), in.firmware_info.gpa(), c.vcpus,
               format_size(c.memory_bytes));
  return {};
}

Result<void> Vm::attach_firmware_io(const BootInputs& in) {
  TRY(attach_fw_cfg(in));
  // SeaBIOS moves PIIX4's PMBASE to 0x600 when it takes tern's ACPI tables (etc/table-loader);
  // OVMF keeps 0xB000. The chipset's block is claimed at 0xB000; a second view of the same
  // registers at 0x600 answers while PMBA points there (each decodes only at its own base).
  if (in.firmware_info.kind == firmware::FirmwareKind::kLegacyBios) {
    auto io = std::make_shared<Piix4PmIo>(chipset_->pm, chipset_->pm1, chipset_->pm_timer,
                                          kSeaBiosPmBase);
    TRY(pio_.insert(io, kSeaBiosPmBase, x86::kPiix4PmBlockSize));
  }
  return {};
}

Result<void> Vm::map_firmware(const BootInputs& in, std::optional<VarsFile> kept_vars,
                              bool restored) {
  const firmware::FirmwareInfo& fw = in.firmware_info;
  // What a snapshot records to map the same image again (vm_snapshot.cc).
  snap::SavedFirmware saved;
  saved.path = *in.config.firmware_path;
  saved.size = fw.size;
  saved.crc32 = firmware::image_crc32(in.firmware.bytes());
  saved.vars_path = in.config.firmware_vars_path.value_or("");
  machine_.firmware = std::move(saved);
  // The VM keeps its own sealed copy: BootInputs is dropped once the VM is built, the memslot
  // is not. Guest reads are served from the slot; guest writes exit as KVM_EXIT_MMIO and reach
  // the sink (dropped, counted).
  ASSIGN_OR_RETURN(RomRegion rom, RomRegion::from_bytes(in.firmware.bytes(), "firmware"));
  firmware_rom_.emplace(std::move(rom));
  TRY(firmware_rom_->map(*vm_, kFirmwareCodeSlot, fw.gpa()));
  rom_sink_ = std::make_shared<RomWriteSink>(*firmware_rom_, "firmware-code");
  TRY(mmio_.insert(rom_sink_, fw.gpa(), fw.size));
  // QEMU's isa-bios: the image's last 128 KiB also appear right below 1 MiB. tern copies them
  // into RAM there (SeaBIOS copies itself into the PAM shadow from this range; with RAM there the
  // copy is the shadow). A restore's RAM already holds that range as the guest left it.
  if (!restored) {
    auto alias = firmware::isa_bios_alias(firmware_rom_->bytes());
    TRY(memory_->write(firmware::kIsaBiosAliasEnd - alias.size(), alias));
  }
  if (in.firmware_vars) {
    // OVMF's variable store directly below the code (0xFFC00000 for Debian's 4M build). The
    // first build takes the file prepare_boot() opened; a reset in place the one the previous
    // VM released, holding what the guest wrote (in.firmware_vars has been moved from by then).
    VarsFile vars = kept_vars ? std::move(*kept_vars) : std::move(*in.firmware_vars);
    const uint64_t gpa = firmware::vars_gpa(fw, vars.size());
    ASSIGN_OR_RETURN(pflash_, PflashDevice::create(&*vm_, std::move(vars), gpa, kFirmwareVarsSlot,
                                                   /*romd=*/true, std::chrono::milliseconds(250)));
    TRY(mmio_.insert(pflash_, pflash_->gpa(), pflash_->size()));
  }
  return {};
}

Result<void> Vm::build_firmware_devices(const std::vector<MadeDevice>& devices) {
  TRY(devices_->attach(pio_, /*with_acpi_pm=*/false));
  ASSIGN_OR_RETURN(pci_, PciDevices::create(*vm_));
  PcChipsetHooks hooks;
  // Chipset callbacks run on the vCPU thread that did the PIO write (as the legacy devices').
  StopLatch* stop = &stop_;
  hooks.on_reset = [stop] {
    stop->post(VcpuThread::stop_event_here(StopKind::kReboot, "KVM_EXIT_IO: PIIX3 reset control 0xCF9"));
  };
  hooks.on_poweroff = [stop] {
    stop->post(VcpuThread::stop_event_here(StopKind::kPowerOff, "KVM_EXIT_IO: PIIX4 PM S5 (power off)"));
  };
  ASSIGN_OR_RETURN(chipset_, attach_pc_chipset(pci_->root(), pio_, std::move(hooks)));
  pci_->use_piix_intx();
  TRY(pci_->add_all(*memory_, devices, &activator_));
  return pci_->attach(pio_, mmio_);
}

void Vm::append_firmware_counters(std::vector<DeviceCounters>& out) const {
  if (fw_cfg_) {
    const FwCfgDevice::Stats s = fw_cfg_->stats();
    out.push_back({"fw_cfg",
                   "fw_cfg",
                   {},
                   {{"selects", s.selects},
                    {"data_reads", s.data_reads},
                    {"dma_ops", s.dma_ops},
                    {"dma_bytes", s.dma_bytes},
                    {"dma_errors", s.dma_errors},
                    {"dma_unreachable", s.dma_unreachable},
                    {"bad_accesses", s.bad_accesses}}});
  }
  if (pflash_) {
    const PflashDevice::Stats s = pflash_->stats();
    out.push_back({"pflash",
                   "pflash",
                   {},
                   {{"programs", s.flash.programs},
                    {"erases", s.flash.erases},
                    {"bad_sequences", s.flash.bad_sequences},
                    {"out_of_range", s.flash.out_of_range},
                    {"romd_flips", s.romd_flips},
                    {"stores", s.stores},
                    {"store_errors", s.store_errors}}});
  }
  if (rom_sink_)
    out.push_back({"firmware-code", "rom", {}, {{"dropped_writes", rom_sink_->dropped_writes()}}});
}

Result<void> Vm::attach_fw_cfg(const BootInputs& in) {
  const VmConfig& c = in.config;
  fw_cfg::FwCfgMachine m;
  m.num_vcpus = c.vcpus;
  m.ram_bytes = c.memory_bytes;
  m.serial_port = x86::kSerialPort;
  // The FADT's PM block must be where the firmware puts PIIX4's PMBASE: SeaBIOS moves it to
  // 0x600 when it loads tables from "etc/table-loader"; OVMF programs 0xB000 on i440FX.
  m.acpi_pm_base =
      in.firmware_info.kind == firmware::FirmwareKind::kUefi ? x86::kPiix4PmBase : kSeaBiosPmBase;
  m.acpi_pm_timer = true;
  // Disks in --disk order (their PCI slot order) are the boot order: function i is c.devices[i].
  for (size_t i = 0; i < c.devices.size(); ++i) {
    const DiskConfig* disk = disk_config_of(c.devices[i]);
    if (!disk) continue;
    m.boot_order.push_back(fw_cfg::BootDevice{disk->interface == DiskInterface::kNvme
                                                  ? fw_cfg::BootDevice::Kind::kNvme
                                                  : fw_cfg::BootDevice::Kind::kVirtioBlk,
                                              pci_->slot(i), 0});
  }
  ASSIGN_OR_RETURN(fw_cfg::FwCfgItems items, fw_cfg::build_fw_cfg_items(m));
  fw_cfg_ = std::make_shared<FwCfgDevice>(*memory_, std::move(items));
  return pio_.insert(fw_cfg_, FwCfgDevice::kPortBase, FwCfgDevice::kPortCount);
}

}  // namespace tern
