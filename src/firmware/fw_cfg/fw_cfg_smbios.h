// SMBIOS tables served through fw_cfg as QEMU does ("etc/smbios/smbios-anchor" and
// "etc/smbios/smbios-tables"): the firmware places the structure table, fills the entry point's
// address and checksum, and adds its own BIOS Information (type 0) structure.
#pragma once

#include <cstdint>
#include <vector>

#include "base/result.h"
#include "firmware/fw_cfg/fw_cfg_items.h"
#include "memory/guest_memory.h"

namespace tern::fw_cfg {

/// What the SMBIOS tables describe.
struct SmbiosMachine {
  uint32_t num_vcpus = 1;       ///< One Processor (type 4) structure each.
  std::vector<RegionSpec> ram;  ///< RAM regions (x86::ram_regions): one type 19 each.
};

/// The two files' contents.
struct SmbiosFiles {
  /// SMBIOS 3.0 entry point (DSP0134 3.x, 5.2.2, 24 bytes, "_SM3_"): structure table maximum
  /// size = tables.size(), address 0 and the checksum for that (the firmware rewrites both).
  /// SeaBIOS has read a 3.0 anchor since 1.16.0 (biostables.c smbios_30_setup_entry_point).
  std::vector<uint8_t> anchor;
  /// Structures (SMBIOS 2.8 layouts; handles as QEMU numbers them): System Information (1),
  /// Chassis (3), Processor (4) per vCPU, Physical Memory Array (16), Memory Device (17),
  /// Memory Array Mapped Address (19) per RAM region, System Boot Information (32), End (127).
  std::vector<uint8_t> tables;
};

/// Builds the files. Errors (op "SMBIOS") for 0 vCPUs, more than 0xFF, or no RAM.
[[nodiscard]] Result<SmbiosFiles> build_smbios_files(const SmbiosMachine& m);

/// Adds "etc/smbios/smbios-anchor" and "etc/smbios/smbios-tables" to `items`.
[[nodiscard]] Result<void> add_smbios_files(FwCfgItems& items, const SmbiosMachine& m);

}  // namespace tern::fw_cfg
