// Vm::build for a firmware boot (--firmware): the machine a PC's firmware expects instead of a
// Linux kernel's entry state. No kernel loader, boot_params, MP table or ACPI tables in RAM: the
// firmware builds its own view of the machine (from fw_cfg and the chipset when present).
#include <cstring>

#include "arch/x86/cpuid.h"
#include "arch/x86/layout.h"
#include "arch/x86/reset_state.h"
#include "base/log.h"
#include "base/size.h"
#include "firmware/firmware_image.h"
#include "vmm/legacy_devices.h"
#include "vmm/pci_devices.h"
#include "vmm/vm.h"

namespace tern {

namespace {

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

Result<void> Vm::build_firmware(const BootInputs& in) {
  const VmConfig& c = in.config;
  if (c.memory_bytes < kMinFirmwareRam)
    return fail("--memory", format_size(c.memory_bytes) + " is too little for --firmware (at least " +
                                format_size(kMinFirmwareRam) + ")");
  // 1. KVM, with its private pages where QEMU puts them: the firmware owns [0xFF000000, 4 GiB).
  TRY(build_kvm(c.vcpus, firmware::kFirmwareTssAddr, firmware::kFirmwareIdentityMapAddr));
  TRY(kvm_->require(KVM_CAP_READONLY_MEM, "KVM_CAP_READONLY_MEM"));

  // 2. Guest RAM, as for a kernel boot (the same e820 layout: RAM below 3 GiB, the rest above 4).
  auto specs = x86::ram_regions(c.memory_bytes);
  ASSIGN_OR_RETURN(MemoryBackend backend,
                   choose_memory_backend(c.memory_backend, c.devices, "--memory-backend"));
  auto mem = GuestMemory::create(specs, backend);
  if (!mem) {
    if (backend == MemoryBackend::kAnon) return fail("--memory", mem.error().message());
    return tl::unexpected(mem.error());
  }
  TRY(add_memory(std::move(*mem)));

  // 3. The image, read-only below 4 GiB, and its isa-bios copy below 1 MiB.
  TRY(map_firmware(in));

  // 4. Devices: the legacy ones (COM1, i8042, CMOS, PM) and PCI bus 0.
  TRY(build_devices(in.console, in.devices));

  // 5. vCPUs in the RESET state. KVM ordering (reset_state.h): the irqchip exists (build_kvm), so
  // each vCPU has an in-kernel LAPIC; CPUID (add_vcpu) before sregs; vCPU 0 is the BSP and runs
  // the reset vector, the others wait for the firmware's INIT-SIPI-SIPI.
  const uint32_t signature = cpuid_signature(supported_cpuid_);
  for (uint32_t i = 0; i < c.vcpus; ++i) {
    ASSIGN_OR_RETURN(KvmVcpu * vcpu, add_vcpu(i, c.vcpus));
    TRY(x86::setup_reset_vcpu(*vcpu, /*bsp=*/i == 0, signature));
  }
  build_stats();
  if (c.kernel_exits) {
    if (auto on = set_kernel_exits(true); !on)
      spdlog::warn("{} (the VM runs without in-kernel exit accounting)", on.error().message());
  }
  machine_.memory_bytes = c.memory_bytes;
  machine_.vcpus = c.vcpus;
  TERN_CHECK(in.devices.size() == c.devices.size());
  for (size_t i = 0; i < in.devices.size(); ++i)
    machine_.devices.push_back(save_device(c.devices[i], in.devices[i]));
  spdlog::info("firmware boot: {} ({}, {}) at {:#x}..4 GiB, {} vCPU(s), {} RAM", *c.firmware_path,
               firmware::firmware_kind_name(in.firmware_info.kind),
               format_size(in.firmware_info.size), in.firmware_info.gpa(), c.vcpus,
               format_size(c.memory_bytes));
  return {};
}

Result<void> Vm::map_firmware(const BootInputs& in) {
  const firmware::FirmwareInfo& fw = in.firmware_info;
  // The VM keeps its own copy: BootInputs is dropped once the VM is built, the memslot is not.
  ASSIGN_OR_RETURN(firmware_image_, HostBuffer::allocate(in.firmware.size()));
  std::memcpy(firmware_image_.bytes().data(), in.firmware.bytes().data(), in.firmware.size());
  // Slots 0..n-1 are RAM (add_memory); the image takes the next one. Guest reads are served from
  // the slot; guest writes exit as KVM_EXIT_MMIO and reach firmware_rom_ (ignored, counted).
  const auto slot = static_cast<uint32_t>(memory_->regions().size());
  TRY(vm_->set_user_memory_region(slot, fw.gpa(), fw.size, firmware_image_.bytes().data(),
                                  KVM_MEM_READONLY));
  firmware_rom_ = std::make_shared<firmware::FirmwareRom>("firmware", firmware_image_.bytes());
  TRY(mmio_.insert(firmware_rom_, fw.gpa(), fw.size));
  // QEMU's isa-bios: the image's last 128 KiB also appear right below 1 MiB. tern copies them
  // into RAM there (SeaBIOS copies itself into the PAM shadow from this range; with no PAM the
  // copy is the shadow).
  auto alias = firmware::isa_bios_alias(firmware_image_.bytes());
  TRY(memory_->write(firmware::kIsaBiosAliasEnd - alias.size(), alias));
  return {};
}

}  // namespace tern
