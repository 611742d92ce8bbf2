#include "arch/x86/e820.h"

#include <fmt/format.h>

#include <algorithm>

#include "arch/x86/layout.h"
#include "base/checked.h"

namespace tern::x86 {

std::vector<E820Entry> build_e820(uint64_t ram_bytes) {
  std::vector<E820Entry> map;
  const uint64_t low_end = std::min(ram_bytes, kEbdaStart);
  if (low_end > 0) map.push_back({0, low_end, kE820Ram});
  map.push_back({kEbdaStart, kLowRamEnd - kEbdaStart, kE820Reserved});
  map.push_back({kAcpiStart, kBiosEnd - kAcpiStart, kE820Reserved});
  const uint64_t below_hole = std::min(ram_bytes, kHoleStart);
  if (below_hole > kHimemStart) map.push_back({kHimemStart, below_hole - kHimemStart, kE820Ram});
  if (ram_bytes > kHoleStart) map.push_back({kHoleEnd, ram_bytes - kHoleStart, kE820Ram});
  return map;
}

Result<void> check_ram_backed(const GuestMemory& mem, const std::vector<E820Entry>& e820,
                              uint64_t ram_bytes) {
  for (const auto& e : e820) {
    if (e.type != kE820Ram) continue;
    if (!mem.slice(e.addr, e.size))
      return fail("guest memory",
                  fmt::format("e820 RAM [{:#x}, {:#x}) for {} MiB is not backed by guest memory",
                              e.addr, e.addr + e.size, ram_bytes / MiB));
  }
  return {};
}

}  // namespace tern::x86
