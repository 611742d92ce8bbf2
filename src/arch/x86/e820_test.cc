#include "arch/x86/e820.h"

#include <gtest/gtest.h>

#include "arch/x86/layout.h"

namespace tern::x86 {
namespace {

// What these tests assert for every size:
//  - the exact entry list (address order, no overlaps);
//  - sum of RAM entries == ram_bytes - (kHimemStart - kEbdaStart): all guest RAM except the
//    EBDA (reserved) and [kLowRamEnd, kHimemStart) (VGA window, ACPI/BIOS area);
//  - every RAM entry lies inside one region of ram_regions(ram_bytes), so the guest never uses
//    memory KVM does not back, and no entry touches the 32-bit hole [3 GiB, 4 GiB).
constexpr uint64_t kNotRam = kHimemStart - kEbdaStart;

void check_invariants(uint64_t ram) {
  SCOPED_TRACE(ram);
  auto map = build_e820(ram);
  uint64_t ram_total = 0;
  for (size_t i = 0; i < map.size(); ++i) {
    const auto& e = map[i];
    ASSERT_GT(e.size, 0u);
    if (i > 0) {
      EXPECT_GE(e.addr, map[i - 1].addr + map[i - 1].size) << "overlap/order at " << i;
    }
    EXPECT_TRUE(e.addr + e.size <= kHoleStart || e.addr >= kHoleEnd) << "entry in the hole";
    if (e.type != kE820Ram) continue;
    ram_total += e.size;
    bool inside = false;
    for (const auto& r : ram_regions(ram))
      inside |= e.addr >= r.gpa && e.addr + e.size <= r.gpa + r.size;
    EXPECT_TRUE(inside) << "RAM entry " << i << " not backed by ram_regions()";
  }
  EXPECT_EQ(ram_total, ram - kNotRam);
}

std::vector<E820Entry> low_entries() {
  return {{0, kEbdaStart, kE820Ram},
          {kEbdaStart, kLowRamEnd - kEbdaStart, kE820Reserved},
          {kAcpiStart, kBiosEnd - kAcpiStart, kE820Reserved}};
}

TEST(E820, Small256MiB) {
  auto want = low_entries();
  want.push_back({kHimemStart, 256 * MiB - kHimemStart, kE820Ram});
  EXPECT_EQ(build_e820(256 * MiB), want);
  check_invariants(256 * MiB);
}

TEST(E820, Exactly3GiBEndsAtTheHole) {
  auto want = low_entries();
  want.push_back({kHimemStart, kHoleStart - kHimemStart, kE820Ram});
  EXPECT_EQ(build_e820(3 * GiB), want);
  check_invariants(3 * GiB);
}

TEST(E820, OnePageAboveTheHole) {
  auto want = low_entries();
  want.push_back({kHimemStart, kHoleStart - kHimemStart, kE820Ram});
  want.push_back({kHoleEnd, 4 * KiB, kE820Ram});
  EXPECT_EQ(build_e820(3 * GiB + 4 * KiB), want);
  check_invariants(3 * GiB + 4 * KiB);
}

TEST(E820, Size3328MiB) {
  auto want = low_entries();
  want.push_back({kHimemStart, kHoleStart - kHimemStart, kE820Ram});
  want.push_back({kHoleEnd, 256 * MiB, kE820Ram});
  EXPECT_EQ(build_e820(3328 * MiB), want);
  check_invariants(3328 * MiB);
}

TEST(E820, Size8GiB) {
  auto want = low_entries();
  want.push_back({kHimemStart, kHoleStart - kHimemStart, kE820Ram});
  want.push_back({kHoleEnd, 5 * GiB, kE820Ram});  // 8 GiB - 3 GiB below the hole
  EXPECT_EQ(build_e820(8 * GiB), want);
  check_invariants(8 * GiB);
}

TEST(E820, TinyGuestHasNoHighMemory) {
  EXPECT_EQ(build_e820(1 * MiB), low_entries());
  check_invariants(1 * MiB);
}

}  // namespace
}  // namespace tern::x86
