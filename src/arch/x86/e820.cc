#include "arch/x86/e820.h"

#include <algorithm>

#include "arch/x86/layout.h"

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

}  // namespace tern::x86
