// The ACPI table image, built once and placed two ways: at kAcpiStart for a direct kernel boot
// (acpi.h write_acpi_tables), or as relocatable blobs the firmware places and patches through
// fw_cfg's table loader (firmware/fw_cfg/fw_cfg_acpi.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "arch/x86/layout.h"
#include "base/result.h"

namespace tern::x86 {

/// What the tables describe.
struct AcpiConfig {
  uint32_t num_vcpus = 1;  ///< 1..kAcpiMaxVcpus (acpi.h).
  /// I/O base of the ACPI PM block: PM1a_EVT_BLK at +0 (4 bytes), PM1a_CNT_BLK at +4 (2 bytes).
  /// kAcpiPm1aEvtPort (0x600) for a direct boot.
  uint16_t pm_base = kAcpiPm1aEvtPort;
  /// FADT RESET_REG (system I/O, one byte, RESET_REG_SUP set) and RESET_VALUE. A direct boot:
  /// tern's ACPI reset port (kAcpiResetPort 0x606, value 1, devices/legacy/acpi_pm.h). The PC
  /// chipset of firmware boots: PIIX3 Reset Control, kResetControlPort 0xCF9 with
  /// kResetControlHardReset 0x06 — what QEMU's PC machine puts there and SeaBIOS/Linux write.
  uint16_t reset_port = kAcpiResetPort;
  uint8_t reset_value = kAcpiResetValue;
  /// Describe a PM timer at pm_base + 8 (PM_TMR_BLK, 4 bytes, 24-bit): only when the platform
  /// has one (the chipset's PIIX4/ICH9 PM block does; direct boot's has not).
  bool pm_timer = false;
};

/// Where the RSDP goes.
enum class AcpiRsdpPlacement {
  kFirstInTables,  ///< At offset 0 of `tables`, the other tables after it (direct boot).
  kSeparate,       ///< In `rsdp`; `tables` starts with the XSDT (the fw_cfg loader's files).
};

/// A pointer field: `size` bytes at `offset` of `tables` (or of `rsdp` when in_rsdp), holding the
/// pointee's offset in `tables`; placing the image adds the tables' base address to it.
struct AcpiPointerField {
  bool in_rsdp = false;
  uint32_t offset = 0;
  uint8_t size = 0;  ///< 4 or 8.
};

/// A checksum byte at `offset` that makes [start, start + length) sum to 0 (in `tables`, or in
/// `rsdp` when in_rsdp). Apply in list order (the RSDP's 20-byte checksum comes before the
/// extended one that covers it).
struct AcpiChecksumField {
  bool in_rsdp = false;
  uint32_t offset = 0;
  uint32_t start = 0;
  uint32_t length = 0;
};

/// The tables with every pointer field holding an offset and every checksum byte 0.
/// Offsets are into `tables`. `tables` must be placed at a 64-byte-aligned address (the FACS).
struct AcpiImage {
  std::vector<uint8_t> rsdp;    ///< kSeparate: the 36-byte RSDP; kFirstInTables: empty.
  std::vector<uint8_t> tables;  ///< Tables, each at a 16-byte boundary (FACS at 64).
  uint32_t rsdp_offset = 0;     ///< kFirstInTables: the RSDP in `tables` (0).
  uint32_t xsdt = 0, fadt = 0, facs = 0, dsdt = 0, madt = 0;
  std::vector<AcpiPointerField> pointers;
  std::vector<AcpiChecksumField> checksums;
};

/// Builds RSDP (revision 2) -> XSDT -> {FADT, MADT}; FADT -> DSDT (DSDT and X_DSDT), FACS
/// (X_FIRMWARE_CTRL). Table contents: acpi.h write_acpi_tables. Errors (op "ACPI tables") when
/// num_vcpus is out of range.
[[nodiscard]] Result<AcpiImage> build_acpi_image(const AcpiConfig& config,
                                                 AcpiRsdpPlacement placement);

/// Places `image` with its tables at `tables_base`: adds the base to every pointer field and fills
/// every checksum — what the firmware's loader does, done by tern for a direct boot.
void place_acpi_image(AcpiImage& image, uint64_t tables_base);

}  // namespace tern::x86
