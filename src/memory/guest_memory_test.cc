#include "memory/guest_memory.h"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <thread>

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

// A vCPU moves a 16-bit ring index (avail->idx) with one store while a device thread reads it:
// every read is a value the index had. Here it flips between 0x00ff and 0x0100 (a carry, as
// 0x28ff -> 0x2900), once per read; a torn read (0x01ff, 0x0000) took 256 stale ring entries
// for new ones, or broke the queue (NEEDS_RESET).
TEST(GuestMemory, AlignedScalarReadsAreNeverTorn) {
  alignas(8) std::array<uint8_t, 64> buf{};
  auto mem = GuestMemory::wrap({MemoryRegion{0x1000, buf.size(), buf.data(), 0}});
  auto* idx = reinterpret_cast<uint16_t*>(buf.data() + 2);
  *idx = 0x00ff;
  std::atomic<uint32_t> reads{0};
  std::atomic<bool> done{false};
  std::thread guest([&] {
    uint16_t v = 0x00ff;
    for (uint32_t seen = 0; !done.load(std::memory_order_relaxed);) {
      if (reads.load(std::memory_order_relaxed) == seen) continue;  // one flip per read
      seen = reads.load(std::memory_order_relaxed);
      v ^= 0x01ff;
      __atomic_store_n(idx, v, __ATOMIC_RELAXED);
    }
  });
  unsigned torn = 0;
  for (uint32_t i = 1; i <= 5'000'000 && torn == 0; ++i) {
    uint16_t v = mem.read_obj<uint16_t>(0x1002).value();
    if (v != 0x00ff && v != 0x0100) ++torn;
    reads.store(i, std::memory_order_relaxed);
  }
  done = true;
  guest.join();
  EXPECT_EQ(torn, 0u);
}

}  // namespace
}  // namespace tern
