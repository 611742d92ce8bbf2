// The x86-64 guest-physical memory map tern builds. All addresses are guest-physical (GPA).
//
//   0x0000_0500  GDT                      0x0000_7000  boot_params ("zero page")
//   0x0000_8ff0  initial stack pointer    0x0000_9000  PML4, 0xA000 PDPT, 0xB000..0xEFFF PDs
//   0x0002_0000  kernel command line      0x0009_FC00  EBDA: MP table (reserved in e820)
//   0x000E_0000  ACPI tables (RSDP first; 0xE0000..0xFFFFF reserved in e820)
//   0x0010_0000  protected-mode kernel (bzImage payload), RAM continues up to the 32-bit hole
//   0xC000_0000 .. 0x1_0000_0000  32-bit hole: PCI MMIO window, IOAPIC, LAPIC, TSS (no RAM)
//   0x1_0000_0000  RAM above the hole when the guest has more than 3 GiB
#pragma once

#include <cstdint>
#include <vector>

#include "base/checked.h"
#include "memory/guest_memory.h"

namespace tern::x86 {

inline constexpr uint64_t kGdtAddr = 0x500;
inline constexpr uint64_t kZeroPageAddr = 0x7000;
inline constexpr uint64_t kBootStackPointer = 0x8ff0;
inline constexpr uint64_t kPml4Addr = 0x9000;
inline constexpr uint64_t kPdptAddr = 0xA000;
inline constexpr uint64_t kPdAddr = 0xB000;  ///< 4 page directories: identity map of 4 GiB.
inline constexpr uint64_t kCmdlineAddr = 0x20000;
inline constexpr uint64_t kCmdlineMaxBytes = 0x10000;  ///< Space reserved, incl. NUL.
inline constexpr uint64_t kEbdaStart = 0x9FC00;       ///< End of low RAM; MP table lives here.
inline constexpr uint64_t kLowRamEnd = 0xA0000;       ///< 640 KiB.
inline constexpr uint64_t kAcpiStart = 0xE0000;       ///< RSDP and ACPI tables.
inline constexpr uint64_t kBiosEnd = 0x100000;
/// Real-mode reset vector (F000:FFF0): a 16-byte stub that requests a reset through the ACPI
/// reset register (Linux on a hardware-reduced ACPI platform "reboots through the BIOS" here).
inline constexpr uint64_t kResetVectorAddr = 0xFFFF0;
inline constexpr uint64_t kHimemStart = 0x100000;  ///< 1 MiB: where the kernel is loaded.

inline constexpr uint64_t kHoleStart = 0xC0000000;   ///< 3 GiB.
inline constexpr uint64_t kHoleEnd = 0x100000000;    ///< 4 GiB.
inline constexpr uint64_t kPciMmioStart = kHoleStart;
inline constexpr uint64_t kPciMmioEnd = 0xFEC00000;
inline constexpr uint64_t kIoapicAddr = 0xFEC00000;
inline constexpr uint64_t kLapicAddr = 0xFEE00000;
inline constexpr uint64_t kIdentityMapAddr = 0xFFFBC000;  ///< KVM_SET_IDENTITY_MAP_ADDR (1 page).
inline constexpr uint64_t kTssAddr = 0xFFFBD000;          ///< KVM_SET_TSS_ADDR (3 pages).

// Legacy I/O ports and ISA IRQ lines (IOAPIC pins and 8259 lines are identical: GSI n = IRQ n).
inline constexpr uint16_t kSerialPort = 0x3F8;  ///< COM1, 8 ports.
inline constexpr uint32_t kSerialIrq = 4;
inline constexpr uint16_t kI8042DataPort = 0x60;
inline constexpr uint16_t kI8042CommandPort = 0x64;
inline constexpr uint32_t kI8042KbdIrq = 1;
inline constexpr uint16_t kPostCodePort = 0x80;
inline constexpr uint16_t kCmosPort = 0x70;  ///< 0x70 index, 0x71 data.
// ACPI fixed-hardware power-management registers (FADT PM1a_EVT_BLK, PM1a_CNT_BLK, RESET_REG),
// served by devices/legacy/acpi_pm.h. Fixed hardware rather than HW_REDUCED_ACPI: on a
// hardware-reduced platform Linux drops the legacy PIC and with it every ISA IRQ (the 8250's IRQ 4
// would never be requestable).
inline constexpr uint16_t kAcpiPm1aEvtPort = 0x600;  ///< PM1_STS (2 bytes) then PM1_EN (2 bytes).
inline constexpr uint16_t kAcpiPm1aCntPort = 0x604;  ///< PM1_CNT (2 bytes).
inline constexpr uint16_t kAcpiResetPort = 0x606;    ///< RESET_REG (1 byte).
inline constexpr uint16_t kAcpiPmPortCount = 7;      ///< Ports 0x600..0x606.
inline constexpr uint8_t kAcpiResetValue = 0x01;
inline constexpr uint32_t kAcpiSciIrq = 9;  ///< FADT SCI_INT (never raised: no ACPI events yet).
inline constexpr uint8_t kAcpiS5SleepType = 5;  ///< SLP_TYP of \_S5_ in the DSDT.

// The PC chipset of firmware boots (devices/pci/pc_chipset.h: i440FX + PIIX3 + PIIX4 PM, as QEMU's
// `-M pc`). Direct kernel boots do not have it and keep the ports above.
/// PIIX4 PM I/O block (PMBA): SeaBIOS and OVMF both program PMBA = 0xB000. PM1a_EVT_BLK at +0
/// (PMSTS, PMEN), PM1a_CNT_BLK at +4 (PMCNTRL), PM_TMR_BLK at +8 (PMTMR) — the FADT's values for
/// firmware boots.
inline constexpr uint16_t kPiix4PmBase = 0xB000;
/// Where SeaBIOS 1.16 moves PIIX4's PM block when it loads ACPI tables from fw_cfg (paravirt.c,
/// "Moving pm_base"); firmware boots serve a second view of the block there.
inline constexpr uint16_t kSeaBiosPmBase = 0x600;
inline constexpr uint16_t kPiix4PmBlockSize = 0x40;  ///< PMBA decodes 64 bytes (bits 15:6).
inline constexpr uint16_t kPiix4Pm1aEvtPort = kPiix4PmBase + 0;
inline constexpr uint16_t kPiix4Pm1aCntPort = kPiix4PmBase + 4;
inline constexpr uint16_t kPiix4PmTimerPort = kPiix4PmBase + 8;
/// ACPI PM timer frequency (ACPI 6.x §4.8.3.3): 3.579545 MHz, 24 bits (FADT TMR_VAL_EXT = 0).
inline constexpr uint64_t kAcpiPmTimerHz = 3'579'545;
/// PIIX3 Reset Control register (RC, I/O 0xCF9, one byte): the FADT RESET_REG of firmware boots.
inline constexpr uint16_t kResetControlPort = 0xCF9;
inline constexpr uint8_t kResetControlHardReset = 0x06;  ///< SYS_RST | RST_CPU.
/// Edge/Level Control Registers ELCR1 (IRQ 0-7) and ELCR2 (IRQ 8-15).
inline constexpr uint16_t kElcrPort = 0x4D0;
/// SCI of the PIIX4 PM function (SeaBIOS writes 9 into its Interrupt Line; QEMU hard-wires it).
inline constexpr uint32_t kPiix4SciIrq = 9;

/// Guest RAM regions for `ram_bytes` of memory: [0, min(ram, 3 GiB)) and, when larger, the rest
/// from 4 GiB. `ram_bytes` must be a non-zero multiple of 4 KiB.
inline std::vector<RegionSpec> ram_regions(uint64_t ram_bytes) {
  std::vector<RegionSpec> r;
  uint64_t low = ram_bytes < kHoleStart ? ram_bytes : kHoleStart;
  r.push_back({0, low});
  if (ram_bytes > low) r.push_back({kHoleEnd, ram_bytes - low});
  return r;
}

}  // namespace tern::x86
