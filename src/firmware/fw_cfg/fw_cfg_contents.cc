#include "firmware/fw_cfg/fw_cfg_contents.h"

#include <fmt/format.h>

#include "arch/x86/acpi.h"
#include "arch/x86/layout.h"
#include "firmware/fw_cfg/fw_cfg_acpi.h"
#include "firmware/fw_cfg/fw_cfg_smbios.h"

namespace tern::fw_cfg {

namespace {

void put_le(std::vector<uint8_t>& out, uint64_t v, size_t width) {
  for (size_t i = 0; i < width; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

std::vector<uint8_t> le_bytes(uint64_t v, size_t width) {
  std::vector<uint8_t> b;
  put_le(b, v, width);
  return b;
}

Result<void> check_machine(const FwCfgMachine& m) {
  if (m.num_vcpus == 0 || m.num_vcpus > x86::kAcpiMaxVcpus)
    return fail("fw_cfg", fmt::format("num_vcpus {}: 1..{}", m.num_vcpus, x86::kAcpiMaxVcpus));
  if (m.max_vcpus != 0 && (m.max_vcpus < m.num_vcpus || m.max_vcpus > x86::kAcpiMaxVcpus))
    return fail("fw_cfg", fmt::format("max_vcpus {}: num_vcpus ({})..{}", m.max_vcpus, m.num_vcpus,
                                      x86::kAcpiMaxVcpus));
  if (m.ram_bytes == 0 || m.ram_bytes % 4096 != 0)
    return fail("fw_cfg", fmt::format("ram_bytes {}: a non-zero multiple of 4 KiB", m.ram_bytes));
  for (const BootDevice& d : m.boot_order)
    if (d.slot > 31 || d.function > 7)
      return fail("fw_cfg", fmt::format("boot_order: PCI {:02x}.{}: slot 0..31, function 0..7",
                                        d.slot, d.function));
  return {};
}

}  // namespace

std::vector<x86::E820Entry> firmware_e820(uint64_t ram_bytes) {
  std::vector<x86::E820Entry> e820;
  for (const RegionSpec& r : x86::ram_regions(ram_bytes))
    if (r.size != 0) e820.push_back({r.gpa, r.size, x86::kE820Ram});
  return e820;
}

std::string boot_order_file(const std::vector<BootDevice>& order) {
  std::string out;
  for (const BootDevice& d : order) {
    const std::string unit = d.function == 0 ? fmt::format("{:x}", d.slot)
                                             : fmt::format("{:x},{:x}", d.slot, d.function);
    if (d.kind == BootDevice::Kind::kVirtioBlk)
      out += fmt::format("/pci@i0cf8/scsi@{}/disk@0,0\n", unit);
    else
      out += fmt::format("/pci@i0cf8/nvme@{}\n", unit);
  }
  if (!out.empty()) out += "HALT";
  return out;
}

Result<FwCfgItems> build_fw_cfg_items(const FwCfgMachine& m) {
  TRY(check_machine(m));
  FwCfgItems items;
  const uint32_t max_vcpus = m.max_vcpus != 0 ? m.max_vcpus : m.num_vcpus;
  TRY(items.set_item_le(kNbCpus, m.num_vcpus, 2));
  TRY(items.set_item_le(kMaxCpus, max_vcpus, 2));
  TRY(items.set_item_le(kRamSize, m.ram_bytes, 8));
  TRY(items.set_item_le(kNoGraphic, m.serial_port != 0 ? 1 : 0, 2));
  TRY(items.set_item_le(kBootMenu, 0, 2));

  // etc/e820: struct e820_entry {le64 address; le64 length; le32 type} (QEMU
  // hw/i386/e820_memory_layout.h).
  std::vector<uint8_t> e820;
  for (const x86::E820Entry& e : firmware_e820(m.ram_bytes)) {
    put_le(e820, e.addr, 8);
    put_le(e820, e.size, 8);
    put_le(e820, e.type, 4);
  }
  TRY(items.add_file("etc/e820", std::move(e820)));

  x86::AcpiConfig acpi;
  acpi.num_vcpus = m.num_vcpus;
  acpi.pm_base = m.acpi_pm_base;
  acpi.pm_timer = m.acpi_pm_timer;
  acpi.reset_port = m.acpi_reset_port;
  acpi.reset_value = m.acpi_reset_value;
  TRY(add_acpi_files(items, acpi));

  TRY(add_smbios_files(items, SmbiosMachine{m.num_vcpus, x86::ram_regions(m.ram_bytes)}));

  const std::string order = boot_order_file(m.boot_order);
  // With its NUL: OVMF refuses a "bootorder" whose last byte is not 0 (QemuBootOrderLib
  // SetBootOrderFromQemu), as QEMU writes it.
  if (!order.empty()) {
    std::vector<uint8_t> bytes(order.begin(), order.end());
    bytes.push_back(0);
    TRY(items.add_file("bootorder", std::move(bytes)));
  }
  if (m.boot_fail_wait_ms != 0)
    TRY(items.add_file("etc/boot-fail-wait", le_bytes(m.boot_fail_wait_ms, 4)));
  if (m.serial_port != 0) TRY(items.add_file("etc/sercon-port", le_bytes(m.serial_port, 2)));
  return items;
}

}  // namespace tern::fw_cfg
