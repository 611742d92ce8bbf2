// tern's ACPI tables served through fw_cfg the way QEMU does: the firmware (SeaBIOS, OVMF)
// allocates, patches and checksums them by following "etc/table-loader" (QEMU
// hw/acpi/bios-linker-loader.c's command format).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "arch/x86/acpi_build.h"
#include "base/result.h"
#include "firmware/fw_cfg/fw_cfg_items.h"

namespace tern::fw_cfg {

inline constexpr std::string_view kAcpiTablesFile = "etc/acpi/tables";
inline constexpr std::string_view kAcpiRsdpFile = "etc/acpi/rsdp";
inline constexpr std::string_view kTableLoaderFile = "etc/table-loader";

// BIOSLinker loader commands: 128-byte entries, little-endian, file names 56 bytes NUL-padded.
inline constexpr size_t kLoaderEntrySize = 128;
inline constexpr uint32_t kLoaderAllocate = 1;     ///< {file, le32 align, u8 zone}
inline constexpr uint32_t kLoaderAddPointer = 2;   ///< {dest_file, src_file, le32 offset, u8 size}
inline constexpr uint32_t kLoaderAddChecksum = 3;  ///< {file, le32 offset, le32 start, le32 length}
inline constexpr uint8_t kLoaderZoneHigh = 1;      ///< Anywhere in RAM below 4 GiB.
inline constexpr uint8_t kLoaderZoneFseg = 2;  ///< 0xF0000..0xFFFFF (where OSes scan for the RSDP).

/// The three files, built from one relocatable table image.
struct AcpiFwCfgFiles {
  std::vector<uint8_t> tables;  ///< etc/acpi/tables: XSDT, FADT, FACS, DSDT, MADT.
  std::vector<uint8_t> rsdp;    ///< etc/acpi/rsdp: the 36-byte RSDP.
  std::vector<uint8_t> loader;  ///< etc/table-loader: the commands, kLoaderEntrySize each.
};

/// Builds the files for `config`: ALLOCATE tables (HIGH, align 64, for the FACS) and the RSDP
/// (FSEG, align 16); ADD_POINTER for every pointer field (XSDT -> FADT, MADT; FADT -> DSDT (32-
/// and 64-bit), FACS; RSDP -> XSDT), whose bytes hold the pointee's offset in its file; then
/// ADD_CHECKSUM for every table and the RSDP (checksum bytes 0 in the files, as OVMF computes
/// them without subtracting the old value; RSDP's 20-byte checksum before the extended one).
/// Errors as x86::build_acpi_image.
[[nodiscard]] Result<AcpiFwCfgFiles> build_acpi_fw_cfg_files(const x86::AcpiConfig& config);

/// Adds the three files to `items`.
[[nodiscard]] Result<void> add_acpi_files(FwCfgItems& items, const x86::AcpiConfig& config);

}  // namespace tern::fw_cfg
