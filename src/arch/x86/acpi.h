// ACPI tables for a hardware-reduced platform (ACPI 6.0): RSDP, XSDT, FADT, DSDT and MADT, written
// at kAcpiStart so Linux finds the RSDP by scanning 0xE0000..0xFFFFF and can power off (\_S5_ +
// SLEEP_CONTROL_REG) and reboot (RESET_REG).
#pragma once

#include <cstdint>

#include "arch/x86/acpi_build.h"
#include "base/result.h"
#include "memory/guest_memory.h"

namespace tern::x86 {

/// Most vCPUs the MADT describes: xAPIC IDs 0..253, with the IOAPIC taking ID num_vcpus.
inline constexpr uint32_t kAcpiMaxVcpus = 254;

/// Where write_acpi_tables put each table (GPA).
struct AcpiTablesInfo {
  uint64_t rsdp = 0;  ///< kAcpiStart (16-byte aligned, inside the guest's scan window).
  uint64_t xsdt = 0;
  uint64_t fadt = 0;
  uint64_t dsdt = 0;
  uint64_t madt = 0;
  uint64_t end = 0;  ///< First byte after the last table (<= kResetVectorAddr).
};

/// Builds and writes the tables for `num_vcpus` (1..kAcpiMaxVcpus), each with a correct checksum
/// and OEM ID "TERN  ":
/// - RSDP revision 2 -> XSDT -> {FADT, MADT}; FADT -> DSDT (X_DSDT and DSDT).
/// - FADT revision 6, fixed hardware (not HW_REDUCED_ACPI, which would drop the legacy PIC):
///   SCI_INT kAcpiSciIrq, SMI_CMD 0, PM1a_EVT_BLK kAcpiPm1aEvtPort (4 bytes), PM1a_CNT_BLK
///   kAcpiPm1aCntPort (2 bytes), RESET_REG kAcpiResetPort with RESET_VALUE kAcpiResetValue
///   (RESET_REG_SUP), IAPC_BOOT_ARCH 8042 | VGA not present, X_FIRMWARE_CTRL -> a FACS.
/// - DSDT: Name(_S5_, Package(){kAcpiS5SleepType, 0, 0, 0}).
/// - MADT: kLapicAddr, PCAT_COMPAT, one enabled local APIC per vCPU (UID = APIC ID = index), one
///   IOAPIC (ID num_vcpus, kIoapicAddr, GSI base 0), no interrupt source override.
/// Also writes the reset-vector stub (reset_vector.h): a guest rebooting through the BIOS
/// (reboot=b) ends at F000:FFF0, and the stub turns that into a RESET_REG write.
/// Errors (op "ACPI tables") before writing anything when num_vcpus is out of range, the tables
/// would reach kResetVectorAddr, or `mem` does not back [kAcpiStart, kBiosEnd).
[[nodiscard]] Result<AcpiTablesInfo> write_acpi_tables(const GuestMemory& mem, uint32_t num_vcpus);
/// As above for `config` (a PM block elsewhere than kAcpiPm1aEvtPort, a PM timer); the default
/// AcpiConfig gives exactly the tables above.
[[nodiscard]] Result<AcpiTablesInfo> write_acpi_tables(const GuestMemory& mem,
                                                       const AcpiConfig& config);

}  // namespace tern::x86
