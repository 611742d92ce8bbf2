#include "memory/guest_memory.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>

namespace tern {
namespace {

TEST(GuestMemory, CreateReadWriteWithinRegion) {
  std::array<RegionSpec, 2> specs{{{0, 0x10000}, {0x100000, 0x2000}}};
  auto mem = GuestMemory::create(specs);
  ASSERT_TRUE(mem) << mem.error().message();
  ASSERT_TRUE(mem->write_obj<uint32_t>(0xFFFC, 0xdeadbeef));
  auto v = mem->read_obj<uint32_t>(0xFFFC);
  ASSERT_TRUE(v);
  EXPECT_EQ(*v, 0xdeadbeefu);
  EXPECT_EQ(mem->total_size(), 0x12000u);
}

TEST(GuestMemory, RejectsOutOfRangeAndStraddlingAccesses) {
  std::array<RegionSpec, 2> specs{{{0, 0x1000}, {0x1000, 0x1000}}};
  auto mem = GuestMemory::create(specs);
  ASSERT_TRUE(mem);
  EXPECT_FALSE(mem->read_obj<uint32_t>(0x2000));  // past the end
  EXPECT_FALSE(mem->read_obj<uint32_t>(0xFFE));   // straddles two regions
  EXPECT_FALSE(mem->slice(UINT64_MAX - 1, 4));    // overflow
  EXPECT_TRUE(mem->slice(0x1FFC, 4));
}

TEST(GuestMemory, RejectsBadSpecs) {
  std::array<RegionSpec, 2> overlap{{{0, 0x2000}, {0x1000, 0x1000}}};
  EXPECT_FALSE(GuestMemory::create(overlap));
  std::array<RegionSpec, 1> unaligned{{{0, 0x1001}}};
  EXPECT_FALSE(GuestMemory::create(unaligned));
}

TEST(GuestMemory, WrapsPlainBuffers) {
  std::array<uint8_t, 64> buf{};
  auto mem = GuestMemory::wrap({MemoryRegion{0x1000, buf.size(), buf.data(), 0}});
  ASSERT_TRUE(mem.write_obj<uint8_t>(0x1003, 7));
  EXPECT_EQ(buf[3], 7);
  EXPECT_FALSE(mem.read_obj<uint8_t>(0x1040));
}

}  // namespace
}  // namespace tern
