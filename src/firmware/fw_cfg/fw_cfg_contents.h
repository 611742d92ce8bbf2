// What tern serves through fw_cfg for a firmware boot (SeaBIOS, OVMF): the items and files QEMU's
// PC machine provides that those firmwares read (see docs/firmware.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "arch/x86/e820.h"
#include "arch/x86/layout.h"
#include "base/result.h"
#include "firmware/fw_cfg/fw_cfg_items.h"

namespace tern::fw_cfg {

/// A disk the firmware may boot from, by where it sits on PCI bus 0.
struct BootDevice {
  enum class Kind { kVirtioBlk, kNvme };
  Kind kind = Kind::kVirtioBlk;
  uint8_t slot = 0;      ///< PCI device number, 0..31.
  uint8_t function = 0;  ///< PCI function, 0..7.
};

/// What the VM builder knows about the machine, for build_fw_cfg_items.
struct FwCfgMachine {
  uint32_t num_vcpus = 1;  ///< vCPUs at boot, 1..x86::kAcpiMaxVcpus.
  uint32_t max_vcpus = 0;  ///< 0: num_vcpus (no hotplug).
  /// Guest RAM in bytes, laid out as x86::ram_regions(): [0, min(ram, 3 GiB)), rest from 4 GiB.
  uint64_t ram_bytes = 0;
  /// Boot order, first = highest priority; empty: no "bootorder" file (firmware default order).
  std::vector<BootDevice> boot_order;
  /// "etc/boot-fail-wait" in milliseconds (SeaBIOS boot.c reads it with romfile_loadint, in ms;
  /// its own default is 60 s). 5 s so that a VM with nothing bootable gives up soon; 0 omits
  /// the file.
  uint32_t boot_fail_wait_ms = 5000;
  /// Serial console port for SeaBIOS ("etc/sercon-port", le16) — with NOGRAPHIC=1 SeaBIOS would
  /// pick COM1 itself; the file makes it explicit. 0 omits the file and sets NOGRAPHIC=0.
  uint16_t serial_port = 0x3F8;
  /// I/O base of the ACPI PM block the FADT describes (PM1a_EVT at +0, PM1a_CNT at +4).
  /// Firmware programs the chipset's PMBASE itself and the tables must agree:
  /// SeaBIOS 1.16 moves it to 0x600 when "etc/table-loader" exists (paravirt.c
  /// qemu_cfg_init), OVMF uses 0xB000 on i440FX (PIIX4_PMBA_VALUE) and 0x600 on Q35.
  uint16_t acpi_pm_base = 0x600;
  bool acpi_pm_timer = false;  ///< FADT PM_TMR_BLK at acpi_pm_base + 8 (when the chipset has it).
  /// FADT RESET_REG / RESET_VALUE: the PIIX3 Reset Control register with a hard reset, as QEMU's
  /// PC machine describes it (fw_cfg serves firmware boots, which always have the chipset).
  uint16_t acpi_reset_port = x86::kResetControlPort;
  uint8_t acpi_reset_value = x86::kResetControlHardReset;
};

/// The e820 map served as "etc/e820": one RAM entry per RAM region (below 3 GiB, above 4 GiB)
/// and nothing else — the firmware reserves its own areas (BIOS, EBDA, tables).
[[nodiscard]] std::vector<x86::E820Entry> firmware_e820(uint64_t ram_bytes);

/// The "bootorder" file: one OpenFirmware device path per line, as QEMU writes them:
/// virtio-blk "/pci@i0cf8/scsi@S[,F]/disk@0,0" (OVMF QemuBootOrderLib translates it to
/// PciRoot(0x0)/Pci(S,F)/HD(; SeaBIOS boot.c matches the prefix "/pci@i0cf8/*@S[,F]"), NVMe
/// "/pci@i0cf8/nvme@S[,F]" (OVMF's generic PCI prefix PciRoot(0x0)/Pci(S,F), which covers every
/// namespace whatever the controller's PCI ID; SeaBIOS as above), then "HALT" (SeaBIOS: boot
/// nothing that is not listed). Empty for an empty list. The file adds a NUL (OVMF requires it).
[[nodiscard]] std::string boot_order_file(const std::vector<BootDevice>& order);

/// The item table for `m`:
/// - numbered: kNbCpus, kMaxCpus (le16), kRamSize (le64), kNoGraphic (le16), kBootMenu = 0;
/// - files: "etc/e820" (firmware_e820 as {le64 address, le64 length, le32 type} each),
///   "etc/acpi/tables", "etc/acpi/rsdp", "etc/table-loader" (fw_cfg_acpi.h), "bootorder",
///   "etc/boot-fail-wait" (le32 ms), "etc/sercon-port" (le16), "etc/smbios/smbios-anchor" and
///   "etc/smbios/smbios-tables" (fw_cfg_smbios.h).
/// Errors (op "fw_cfg") name the field: vCPU counts out of range, RAM of 0 or not a multiple of
/// 4 KiB, a PCI slot > 31 or function > 7.
[[nodiscard]] Result<FwCfgItems> build_fw_cfg_items(const FwCfgMachine& m);

}  // namespace tern::fw_cfg
