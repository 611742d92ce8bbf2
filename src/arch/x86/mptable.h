// Intel MultiProcessor Specification 1.4 tables (MP floating pointer + MP configuration table)
// at kEbdaStart, where Linux's smp_scan_config() looks (the last KiB of base memory).
#pragma once

#include <cstdint>

#include "base/result.h"
#include "memory/guest_memory.h"

namespace tern::x86 {

/// Size in bytes of the floating pointer plus configuration table for `num_vcpus` processors.
[[nodiscard]] uint64_t mptable_size(uint32_t num_vcpus);

/// Most vCPUs whose MP table fits in [kEbdaStart, kLowRamEnd) (1 KiB): 40.
[[nodiscard]] uint32_t mptable_max_vcpus();

/// Where write_mptable put things (GPA, bytes).
struct MpTableInfo {
  uint64_t floating_pointer_gpa = 0;  ///< kEbdaStart, 16 bytes.
  uint64_t config_table_gpa = 0;      ///< Right after the floating pointer.
  uint64_t end = 0;                   ///< First byte after the tables (<= kLowRamEnd).
};

/// Writes the MP floating pointer (spec rev 1.4, configuration table present, virtual-wire mode)
/// and a configuration table with: one processor entry per vCPU (APIC ID = index, enabled, BSP
/// flag on 0), an ISA bus (ID 0), one IOAPIC (ID = num_vcpus, version 0x11, kIoapicAddr), I/O
/// interrupt entries ISA IRQ n -> IOAPIC pin n for n = 0..15, and LINT0 = ExtINT, LINT1 = NMI to
/// all local APICs; both checksums set. Errors (op "MP table"), before writing anything, when
/// num_vcpus is 0 or the tables would not end at or below kLowRamEnd.
[[nodiscard]] Result<MpTableInfo> write_mptable(const GuestMemory& mem, uint32_t num_vcpus);

}  // namespace tern::x86
