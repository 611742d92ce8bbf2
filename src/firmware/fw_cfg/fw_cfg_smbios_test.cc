#include "firmware/fw_cfg/fw_cfg_smbios.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "arch/x86/checksum.h"
#include "arch/x86/layout.h"

namespace tern::fw_cfg {
namespace {

using ::testing::ElementsAre;

uint64_t le(const uint8_t* p, size_t width) {
  uint64_t v = 0;
  for (size_t i = 0; i < width; ++i) v |= uint64_t{p[i]} << (8 * i);
  return v;
}

/// One parsed structure: its formatted area and its strings (index 0 = string 1).
struct Parsed {
  std::vector<uint8_t> area;
  std::vector<std::string> strings;
  std::string str(size_t off) const {
    const uint8_t n = area.at(off);
    return n == 0 ? "" : strings.at(n - 1);
  }
};

/// Walks the structure table as an OS does (DSP0134 6.1.3): formatted area of `length` bytes,
/// then NUL-terminated strings ending in a double NUL; stops after type 127.
std::vector<Parsed> parse(const std::vector<uint8_t>& t) {
  std::vector<Parsed> out;
  size_t at = 0;
  while (at < t.size()) {
    EXPECT_LE(at + 4, t.size());
    const uint8_t len = t[at + 1];
    EXPECT_GE(len, 4);
    Parsed p;
    p.area.assign(t.begin() + at, t.begin() + at + len);
    size_t s = at + len;
    if (t.at(s) == 0) {
      s += 2;
    } else {
      while (t.at(s) != 0) {
        std::string str(reinterpret_cast<const char*>(&t[s]));
        s += str.size() + 1;
        p.strings.push_back(str);
      }
      ++s;
    }
    out.push_back(p);
    at = s;
    if (p.area[0] == 127) break;
  }
  EXPECT_EQ(at, t.size()) << "bytes after the end-of-table structure";
  return out;
}

TEST(FwCfgSmbios, StructuresAndEntryPoint) {
  constexpr uint64_t kGiB = uint64_t{1} << 30;
  auto f = build_smbios_files({3, x86::ram_regions(4 * kGiB)});
  ASSERT_TRUE(f.has_value()) << f.error().message();

  ASSERT_EQ(f->anchor.size(), 24u);
  EXPECT_EQ(std::string(f->anchor.begin(), f->anchor.begin() + 5), "_SM3_");
  EXPECT_EQ(x86::byte_sum(f->anchor), 0);
  EXPECT_EQ(f->anchor[6], 24);
  EXPECT_EQ(f->anchor[7], 3);
  EXPECT_EQ(le(&f->anchor[12], 4), f->tables.size());

  auto s = parse(f->tables);
  std::vector<int> types;
  std::set<uint64_t> handles;
  std::map<int, std::vector<const Parsed*>> by_type;
  for (const Parsed& p : s) {
    types.push_back(p.area[0]);
    EXPECT_TRUE(handles.insert(le(&p.area[2], 2)).second) << "duplicate handle";
    by_type[p.area[0]].push_back(&p);
  }
  EXPECT_THAT(types, ElementsAre(1, 3, 4, 4, 4, 16, 17, 19, 19, 32, 127));
  EXPECT_EQ(by_type[1][0]->str(4), "tern");
  EXPECT_EQ(by_type[1][0]->area.size(), 0x1Bu);
  EXPECT_EQ(by_type[4][2]->str(4), "CPU 2");
  EXPECT_EQ(by_type[4][0]->area[0x18], 0x41);

  const Parsed& array = *by_type[16][0];
  EXPECT_EQ(le(&array.area[7], 4), 4 * kGiB / 1024);  // KiB
  const Parsed& dimm = *by_type[17][0];
  EXPECT_EQ(le(&dimm.area[4], 2), le(&array.area[2], 2)) << "device -> array handle";
  EXPECT_EQ(le(&dimm.area[0xC], 2), 4096u);  // MiB
  EXPECT_EQ(dimm.str(0x10), "DIMM 0");
  // Mapped addresses in KiB, inclusive ends: [0, 3 GiB) and [4 GiB, 5 GiB).
  EXPECT_EQ(le(&by_type[19][0]->area[4], 4), 0u);
  EXPECT_EQ(le(&by_type[19][0]->area[8], 4), x86::kHoleStart / 1024 - 1);
  EXPECT_EQ(le(&by_type[19][1]->area[4], 4), x86::kHoleEnd / 1024);
  EXPECT_EQ(le(&by_type[19][1]->area[8], 4), (x86::kHoleEnd + kGiB) / 1024 - 1);
  EXPECT_EQ(le(&by_type[19][1]->area[0xC], 2), le(&array.area[2], 2));
}

TEST(FwCfgSmbios, LargeMemoryUsesTheExtendedFields) {
  const uint64_t ram = uint64_t{64} << 30;  // 64 GiB: 65536 MiB does not fit type 17's size
  auto f = build_smbios_files({1, x86::ram_regions(ram)});
  ASSERT_TRUE(f.has_value());
  for (const Parsed& p : parse(f->tables)) {
    if (p.area[0] != 17) continue;
    EXPECT_EQ(le(&p.area[0xC], 2), 0x7FFFu);
    EXPECT_EQ(le(&p.area[0x1C], 4), 65536u);
  }
}

TEST(FwCfgSmbios, RefusesBadMachines) {
  EXPECT_FALSE(build_smbios_files({0, x86::ram_regions(1 << 30)}).has_value());
  EXPECT_FALSE(build_smbios_files({256, x86::ram_regions(1 << 30)}).has_value());
  EXPECT_FALSE(build_smbios_files({1, {}}).has_value());
}

}  // namespace
}  // namespace tern::fw_cfg
