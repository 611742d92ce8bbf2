#include "arch/x86/linux_placement.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "arch/x86/layout.h"

namespace tern::x86 {
namespace {

using ::testing::HasSubstr;

BzImage kernel(uint32_t init_size, uint64_t pref, uint32_t align = 2 * MiB, bool reloc = true,
               size_t payload = 64 * KiB) {
  BzImage k;
  k.init_size = init_size;
  k.pref_address = pref;
  k.kernel_alignment = align;
  k.relocatable_kernel = reloc;
  k.payload.resize(payload);
  return k;
}

TEST(KernelFootprint, RelocatableDecompressesAtPrefAddress) {
  auto f = kernel_footprint(kernel(50 * MiB, 16 * MiB), kHimemStart);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->load_gpa, kHimemStart);
  EXPECT_EQ(f->payload_end, kHimemStart + 64 * KiB);
  EXPECT_EQ(f->decompress_gpa, 16 * MiB);
  EXPECT_EQ(f->end, 66 * MiB);
}

TEST(KernelFootprint, RelocatableAboveLowPrefAddressUsesAlignedLoadAddress) {
  // 1 MiB aligned up to 2 MiB is above pref_address = 1 MiB.
  auto f = kernel_footprint(kernel(8 * MiB, 1 * MiB), kHimemStart);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->decompress_gpa, 2 * MiB);
  EXPECT_EQ(f->end, 10 * MiB);
}

TEST(KernelFootprint, FixedKernelUsesPrefAddress) {
  auto f = kernel_footprint(kernel(8 * MiB, 1 * MiB, 2 * MiB, false), kHimemStart);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->decompress_gpa, 1 * MiB);
  EXPECT_EQ(f->end, 9 * MiB);
}

TEST(KernelFootprint, PayloadLargerThanDecompressionArea) {
  auto f = kernel_footprint(kernel(1 * MiB, 1 * MiB, 2 * MiB, false, 3 * MiB), kHimemStart);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->end, 4 * MiB);  // the payload itself ends later than init_size
}

TEST(CheckLowRam, ExactFitAndOnePageShort) {
  KernelFootprint f{kHimemStart, 2 * MiB, 16 * MiB, 66 * MiB};
  EXPECT_TRUE(check_low_ram(f, 10 * MiB, 76 * MiB));
  EXPECT_TRUE(check_low_ram(f, 10 * MiB - 100, 76 * MiB));  // initrd rounded up to a page
  auto r = check_low_ram(f, 10 * MiB + 1, 76 * MiB);
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message(), HasSubstr("76 MiB of guest RAM is too small"));
  EXPECT_THAT(r.error().message(), HasSubstr("at least 77 MiB"));
  r = check_low_ram(f, 0, 64 * MiB);
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message(), HasSubstr("at least 66 MiB"));
}

TEST(CheckLowRam, OnlyRamBelowTheHoleCounts) {
  KernelFootprint f{kHimemStart, 2 * MiB, 16 * MiB, 66 * MiB};
  EXPECT_FALSE(check_low_ram(f, 3 * GiB, 8 * GiB));
}

TEST(PlaceInitrd, FitsAtTheTopOfRam) {
  auto a = place_initrd(10 * MiB, 66 * MiB, 0x7FFFFFFF, 256 * MiB);
  ASSERT_TRUE(a);
  EXPECT_EQ(*a, 246 * MiB);
  // Not a page multiple: start rounded down to a page, end still within RAM.
  a = place_initrd(5000, 66 * MiB, 0x7FFFFFFF, 256 * MiB);
  ASSERT_TRUE(a);
  EXPECT_EQ(*a, 256 * MiB - 8 * KiB);
}

TEST(PlaceInitrd, AtTheLimitStartsRightAtKernelEnd) {
  auto a = place_initrd(10 * MiB, 66 * MiB, 0x7FFFFFFF, 76 * MiB);
  ASSERT_TRUE(a);
  EXPECT_EQ(*a, 66 * MiB);
}

TEST(PlaceInitrd, TooBig) {
  auto r = place_initrd(10 * MiB + 1, 66 * MiB, 0x7FFFFFFF, 76 * MiB);
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message(), HasSubstr("10485761 bytes (11 MiB) do not fit"));
  EXPECT_THAT(r.error().message(), HasSubstr("kernel's end at 0x4200000"));
  EXPECT_FALSE(place_initrd(4 * GiB, 66 * MiB, 0xFFFFFFFF, 8 * GiB));
}

TEST(PlaceInitrd, InitrdAddrMaxBelowKernelEnd) {
  // The kernel ends at 66 MiB but the initrd must end by 64 MiB.
  auto r = place_initrd(1 * MiB, 66 * MiB, 64 * MiB - 1, 256 * MiB);
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message(), HasSubstr("initrd_addr_max 0x3ffffff"));
}

TEST(PlaceInitrd, InitrdAddrMaxIsTheLastUsableByte) {
  auto a = place_initrd(1 * MiB, 66 * MiB, 128 * MiB - 1, 256 * MiB);
  ASSERT_TRUE(a);
  EXPECT_EQ(*a, 127 * MiB);  // ends exactly at initrd_addr_max + 1
}

TEST(PlaceInitrd, StaysBelowTheHoleAnd4GiB) {
  // Large guest: RAM above 4 GiB is never used; the 2 GiB initrd_addr_max wins.
  auto a = place_initrd(16 * MiB, 66 * MiB, 0x7FFFFFFF, 8 * GiB);
  ASSERT_TRUE(a);
  EXPECT_EQ(*a, 2 * GiB - 16 * MiB);
  // With initrd_addr_max at 4 GiB - 1, the end of RAM below the hole (3 GiB) wins.
  a = place_initrd(16 * MiB, 66 * MiB, 0xFFFFFFFF, 8 * GiB);
  ASSERT_TRUE(a);
  EXPECT_EQ(*a, 3 * GiB - 16 * MiB);
}

TEST(PlaceInitrd, EmptyIsAnError) {
  EXPECT_FALSE(place_initrd(0, 66 * MiB, 0x7FFFFFFF, 1 * GiB));
}

}  // namespace
}  // namespace tern::x86
