#include "devices/legacy/cmos_memory.h"

#include <gtest/gtest.h>

namespace tern {
namespace {

constexpr uint64_t kMiB = 1024 * 1024;
constexpr uint64_t kGiB = 1024 * kMiB;

uint8_t cmos_read(CmosRtc& c, uint8_t index) {
  uint8_t v = index;
  c.write(0, std::span<const uint8_t>(&v, 1));
  c.read(1, std::span<uint8_t>(&v, 1));
  return v;
}
uint32_t word(CmosRtc& c, uint8_t lo) {
  return cmos_read(c, lo) | cmos_read(c, lo + 1) << 8;
}

uint16_t checksum(CmosRtc& c) {
  uint16_t s = 0;
  for (uint8_t i = 0x10; i <= 0x2D; ++i) s = static_cast<uint16_t>(s + cmos_read(c, i));
  return s;
}

TEST(CmosMemoryTest, HalfGiB) {
  CmosRtc c([] { return int64_t{0}; });
  set_cmos_memory(c, {.below_4g = 512 * kMiB, .above_4g = 0, .cpus = 1});
  EXPECT_EQ(word(c, 0x15), 640u);
  EXPECT_EQ(word(c, 0x17), 0xFFFFu);  // KiB above 1 MiB, capped (511 MiB)
  EXPECT_EQ(word(c, 0x30), 0xFFFFu);
  EXPECT_EQ(word(c, 0x34), (512u - 16) * 16);  // 64 KiB units above 16 MiB
  EXPECT_EQ(cmos_read(c, 0x5B) | cmos_read(c, 0x5C) << 8 | cmos_read(c, 0x5D) << 16, 0);
  EXPECT_EQ(cmos_read(c, 0x5F), 0);
  EXPECT_EQ(cmos_read(c, 0x2E) << 8 | cmos_read(c, 0x2F), checksum(c));
}

TEST(CmosMemoryTest, SmallGuestUncapped) {
  CmosRtc c([] { return int64_t{0}; });
  set_cmos_memory(c, {.below_4g = 48 * kMiB, .above_4g = 0, .cpus = 4});
  EXPECT_EQ(word(c, 0x17), 47u * 1024);
  EXPECT_EQ(word(c, 0x30), 47u * 1024);
  EXPECT_EQ(word(c, 0x34), 32u * 16);
  EXPECT_EQ(cmos_read(c, 0x5F), 3);
}

TEST(CmosMemoryTest, ThreeAndAHalfGiBSplitAtTheHole) {
  CmosRtc c([] { return int64_t{0}; });
  // tern's layout: 3 GiB below the hole, 0.5 GiB from 4 GiB.
  set_cmos_memory(c, {.below_4g = 3 * kGiB, .above_4g = kGiB / 2, .cpus = 2});
  EXPECT_EQ(word(c, 0x15), 640u);
  EXPECT_EQ(word(c, 0x17), 0xFFFFu);  // capped
  EXPECT_EQ(word(c, 0x30), 0xFFFFu);
  EXPECT_EQ(word(c, 0x34), (3u * 1024 - 16) * 16);  // 0xBF00
  EXPECT_EQ(cmos_read(c, 0x5B) | cmos_read(c, 0x5C) << 8 | cmos_read(c, 0x5D) << 16, 0x2000);
  EXPECT_EQ(cmos_read(c, 0x5F), 1);
  EXPECT_EQ(cmos_read(c, 0x2E) << 8 | cmos_read(c, 0x2F), checksum(c));
}

TEST(CmosMemoryTest, SixGiB) {
  CmosRtc c([] { return int64_t{0}; });
  set_cmos_memory(c, {.below_4g = 3 * kGiB, .above_4g = 3 * kGiB, .cpus = 8});
  EXPECT_EQ(word(c, 0x34), 0xBF00u);
  EXPECT_EQ(cmos_read(c, 0x5B) | cmos_read(c, 0x5C) << 8 | cmos_read(c, 0x5D) << 16, 0xC000);
  EXPECT_EQ(cmos_read(c, 0x5F), 7);
  // The checksum covers other bytes of 10h-2Dh as the CMOS holds them.
  c.set_ram(0x10, 0x44);
  set_cmos_memory(c, {.below_4g = 3 * kGiB, .above_4g = 3 * kGiB, .cpus = 8});
  EXPECT_EQ(cmos_read(c, 0x10), 0x44);
  EXPECT_EQ(cmos_read(c, 0x2E) << 8 | cmos_read(c, 0x2F), checksum(c));
}

TEST(CmosMemoryTest, TinyGuestsAndLimits) {
  CmosRtc c([] { return int64_t{0}; });
  const auto bytes = cmos_memory_bytes({.below_4g = 512 * 1024, .above_4g = 0, .cpus = 0}, c);
  auto at = [&](uint8_t i) {
    for (auto [k, v] : bytes)
      if (k == i) return v;
    return uint8_t{0xAA};
  };
  EXPECT_EQ(at(0x15) | at(0x16) << 8, 512);
  EXPECT_EQ(at(0x17), 0);
  EXPECT_EQ(at(0x34), 0);
  EXPECT_EQ(at(0x5F), 0);     // cpus clamped to 1
  EXPECT_EQ(c.ram(0x15), 0);  // cmos_memory_bytes does not store
  c.set_ram(200, 1);          // out of range: ignored
  EXPECT_EQ(c.ram(200), 0xFF);
}

}  // namespace
}  // namespace tern
