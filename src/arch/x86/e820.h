// The BIOS-style (e820) memory map tern hands the guest in boot_params.e820_table.
#pragma once

#include <cstdint>
#include <vector>

#include "base/result.h"
#include "memory/guest_memory.h"

namespace tern::x86 {

inline constexpr uint32_t kE820Ram = 1;
inline constexpr uint32_t kE820Reserved = 2;

/// One memory map entry: [addr, addr + size) of `type` (bytes, GPA).
struct E820Entry {
  uint64_t addr = 0;
  uint64_t size = 0;
  uint32_t type = 0;
  bool operator==(const E820Entry&) const = default;
};

/// The memory map for `ram_bytes` of guest RAM laid out by layout.h's ram_regions(), in address
/// order:
///   RAM      [0, kEbdaStart)                 low memory
///   reserved [kEbdaStart, kLowRamEnd)        EBDA: MP table
///   reserved [kAcpiStart, kBiosEnd)          ACPI tables / BIOS area
///   RAM      [kHimemStart, min(ram, kHoleStart))
///   RAM      [kHoleEnd, kHoleEnd + ram - kHoleStart)   only when ram > kHoleStart
/// [kLowRamEnd, kAcpiStart) (the VGA/option-ROM window) is neither. RAM entries are clipped to
/// `ram_bytes`, so a guest smaller than 1 MiB gets no high-memory entry (load_linux rejects such
/// sizes anyway). Total RAM reported = ram_bytes - (kHimemStart - kEbdaStart) for ram >= 1 MiB.
[[nodiscard]] std::vector<E820Entry> build_e820(uint64_t ram_bytes);

/// Checks that `mem` backs every RAM entry of `e820` (built for `ram_bytes`). Error: op "guest
/// memory", naming the first range that is not backed.
[[nodiscard]] Result<void> check_ram_backed(const GuestMemory& mem,
                                            const std::vector<E820Entry>& e820, uint64_t ram_bytes);

}  // namespace tern::x86
