#include "virtio/descriptor_chain.h"

#include <gtest/gtest.h>

#include "virtio/testing/fake_virtqueue_driver.h"

namespace tern::virtio {
namespace {

using testing::FakeGuestRam;
using testing::FakeVirtqueueDriver;

constexpr uint16_t kSize = 16;

class ChainTest : public ::testing::Test {
 protected:
  FakeGuestRam ram;
  FakeVirtqueueDriver drv{ram.mem(), 0x1000, kSize};
  auto walk(uint16_t head, bool indirect_ok = true) {
    return walk_descriptor_chain(ram.mem(), drv.config().desc_gpa, kSize, head, indirect_ok);
  }
};

TEST_F(ChainTest, DirectChainReadableThenWritable) {
  drv.write_desc(0, 0x10000, 16, VIRTQ_DESC_F_NEXT, 5);
  drv.write_desc(5, 0x11000, 512, VIRTQ_DESC_F_NEXT | VIRTQ_DESC_F_WRITE, 2);
  drv.write_desc(2, 0x12000, 1, VIRTQ_DESC_F_WRITE, 0);
  auto c = walk(0);
  ASSERT_TRUE(c);
  ASSERT_EQ(c->segments.size(), 3u);
  EXPECT_EQ(c->readable_bytes, 16u);
  EXPECT_EQ(c->writable_bytes, 513u);
  EXPECT_EQ(c->segments[1].gpa, 0x11000u);
  EXPECT_EQ(c->segments[1].host.data(), ram.at(0x11000));
  EXPECT_TRUE(c->segments[2].writable);
}

TEST_F(ChainTest, HeadOutOfRange) {
  EXPECT_EQ(walk(kSize).error(), ChainError::kHeadOutOfRange);
}

TEST_F(ChainTest, NextOutOfRange) {
  drv.write_desc(0, 0x10000, 16, VIRTQ_DESC_F_NEXT, kSize);
  EXPECT_EQ(walk(0).error(), ChainError::kNextOutOfRange);
}

TEST_F(ChainTest, LoopIsBoundedByQueueSize) {
  drv.write_desc(0, 0x10000, 16, VIRTQ_DESC_F_NEXT, 1);
  drv.write_desc(1, 0x10000, 16, VIRTQ_DESC_F_NEXT, 0);
  EXPECT_EQ(walk(0).error(), ChainError::kTooLong);
  drv.write_desc(3, 0x10000, 16, VIRTQ_DESC_F_NEXT, 3);  // self-loop
  EXPECT_EQ(walk(3).error(), ChainError::kTooLong);
}

TEST_F(ChainTest, BufferOutsideRam) {
  drv.write_desc(0, 0x10000000, 16, 0, 0);
  EXPECT_EQ(walk(0).error(), ChainError::kBadBuffer);
}

TEST_F(ChainTest, BufferInHoleOrStraddlingIt) {
  drv.write_desc(0, FakeGuestRam::kHoleStart + 0x100, 16, 0, 0);
  EXPECT_EQ(walk(0).error(), ChainError::kBadBuffer);
  drv.write_desc(0, FakeGuestRam::kHoleStart - 8, 16, 0, 0);  // crosses into the hole
  EXPECT_EQ(walk(0).error(), ChainError::kBadBuffer);
}

TEST_F(ChainTest, WrappingBuffer) {
  drv.write_desc(0, UINT64_MAX - 7, 16, 0, 0);
  EXPECT_EQ(walk(0).error(), ChainError::kBadBuffer);
}

TEST_F(ChainTest, ZeroLengthBufferIsKept) {
  drv.write_desc(0, 0x10000, 0, VIRTQ_DESC_F_NEXT, 1);
  drv.write_desc(1, 0x10000, 16, 0, 0);
  auto c = walk(0);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->segments.size(), 2u);
  EXPECT_EQ(c->readable_bytes, 16u);
}

TEST_F(ChainTest, ReadableAfterWritableRefused) {
  drv.write_desc(0, 0x10000, 16, VIRTQ_DESC_F_WRITE | VIRTQ_DESC_F_NEXT, 1);
  drv.write_desc(1, 0x11000, 16, 0, 0);
  EXPECT_EQ(walk(0).error(), ChainError::kReadableAfterWritable);
}

TEST_F(ChainTest, IndirectTable) {
  drv.write_indirect_table(0x20000, {{0x10000, 16, false}, {0x11000, 4096, true}, {0x12000, 1, true}});
  drv.write_desc(4, 0x20000, 48, VIRTQ_DESC_F_INDIRECT, 0);
  auto c = walk(4);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->head, 4);
  EXPECT_EQ(c->segments.size(), 3u);
  EXPECT_EQ(c->writable_bytes, 4097u);
  EXPECT_EQ(walk(4, /*indirect_ok=*/false).error(), ChainError::kIndirectNotNegotiated);
}

TEST_F(ChainTest, IndirectAfterDirectDescriptors) {
  drv.write_indirect_table(0x20000, {{0x12000, 1, true}});
  drv.write_desc(0, 0x10000, 16, VIRTQ_DESC_F_NEXT, 1);
  drv.write_desc(1, 0x20000, 16, VIRTQ_DESC_F_INDIRECT, 0);
  auto c = walk(0);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->segments.size(), 2u);
}

TEST_F(ChainTest, NestedIndirectRefused) {
  // Entry 0 of the table points at another table.
  (void)ram.mem().write_obj(0x20000, VirtqDesc{0x21000, 16, VIRTQ_DESC_F_INDIRECT, 0});
  drv.write_desc(0, 0x20000, 16, VIRTQ_DESC_F_INDIRECT, 0);
  EXPECT_EQ(walk(0).error(), ChainError::kIndirectNested);
}

TEST_F(ChainTest, IndirectWithNextRefused) {
  drv.write_indirect_table(0x20000, {{0x10000, 16, false}});
  drv.write_desc(0, 0x20000, 16, VIRTQ_DESC_F_INDIRECT | VIRTQ_DESC_F_NEXT, 1);
  EXPECT_EQ(walk(0).error(), ChainError::kIndirectWithNext);
}

TEST_F(ChainTest, IndirectBadLengths) {
  drv.write_desc(0, 0x20000, 0, VIRTQ_DESC_F_INDIRECT, 0);
  EXPECT_EQ(walk(0).error(), ChainError::kIndirectBadLength);
  drv.write_desc(0, 0x20000, 24, VIRTQ_DESC_F_INDIRECT, 0);
  EXPECT_EQ(walk(0).error(), ChainError::kIndirectBadLength);
  drv.write_desc(0, 0x20000, 16 * (kMaxIndirectDescriptors + 1), VIRTQ_DESC_F_INDIRECT, 0);
  EXPECT_EQ(walk(0).error(), ChainError::kIndirectBadLength);
  drv.write_desc(0, FakeGuestRam::kHoleStart, 16, VIRTQ_DESC_F_INDIRECT, 0);
  EXPECT_EQ(walk(0).error(), ChainError::kBadBuffer);
}

TEST_F(ChainTest, IndirectLoopAndNextOutOfTable) {
  (void)ram.mem().write_obj(0x20000, VirtqDesc{0x10000, 16, VIRTQ_DESC_F_NEXT, 1});
  (void)ram.mem().write_obj(0x20010, VirtqDesc{0x10000, 16, VIRTQ_DESC_F_NEXT, 0});
  drv.write_desc(0, 0x20000, 32, VIRTQ_DESC_F_INDIRECT, 0);
  EXPECT_EQ(walk(0).error(), ChainError::kTooLong);
  (void)ram.mem().write_obj(0x20010, VirtqDesc{0x10000, 16, VIRTQ_DESC_F_NEXT, 2});
  EXPECT_EQ(walk(0).error(), ChainError::kNextOutOfRange);
}

// Drivers size requests from seg_max, which may exceed the ring (a vhost-user back-end advertises
// it before the front-end picks the ring): tables up to kMaxIndirectDescriptors are walked, as
// QEMU's device model and Linux's vhost walk them.
TEST_F(ChainTest, IndirectTableLongerThanTheQueue) {
  for (uint32_t n : {uint32_t{kSize} + 2, kMaxIndirectDescriptors}) {
    std::vector<FakeVirtqueueDriver::Buf> bufs(n, {0x10000, 512, false});
    bufs.back() = {0x12000, 1, true};
    drv.write_indirect_table(0x20000, bufs);
    drv.write_desc(0, 0x20000, 16 * n, VIRTQ_DESC_F_INDIRECT, 0);
    auto c = walk(0);
    ASSERT_TRUE(c) << n << ": " << chain_error_name(c.error());
    EXPECT_EQ(c->segments.size(), n);
    EXPECT_EQ(c->descriptors, n);
    EXPECT_EQ(c->writable_bytes, 1u);
  }
  // A loop inside a long table is still bounded by the table.
  (void)ram.mem().write_obj(0x20000 + 16 * 99, VirtqDesc{0x10000, 16, VIRTQ_DESC_F_NEXT, 0});
  drv.write_desc(0, 0x20000, 16 * 100, VIRTQ_DESC_F_INDIRECT, 0);
  EXPECT_EQ(walk(0).error(), ChainError::kTooLong);
}

TEST_F(ChainTest, RefusedChainTailIsTheLastWritableBuffer) {
  auto tail = [&](uint16_t head) {
    return refused_chain_tail(ram.mem(), drv.config().desc_gpa, kSize, head, true);
  };
  // A buffer outside RAM mid-chain: the status byte at the end is still found.
  drv.write_desc(0, 0x10000, 16, VIRTQ_DESC_F_NEXT, 1);
  drv.write_desc(1, 0x10000000, 512, VIRTQ_DESC_F_NEXT, 2);
  drv.write_desc(2, 0x12000, 1, VIRTQ_DESC_F_WRITE, 0);
  ASSERT_FALSE(walk(0));
  auto t = tail(0);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->gpa, 0x12000u);
  EXPECT_EQ(t->host.size(), 1u);
  EXPECT_EQ(t->host.data(), ram.at(0x12000));
  // In an indirect table (bounded as the walker bounds it).
  std::vector<FakeVirtqueueDriver::Buf> bufs(3, {0x10000000, 512, false});
  bufs.back() = {0x12000, 4, true};
  drv.write_indirect_table(0x20000, bufs);
  drv.write_desc(3, 0x20000, 48, VIRTQ_DESC_F_INDIRECT, 0);
  ASSERT_FALSE(walk(3));
  ASSERT_TRUE(tail(3));
  EXPECT_EQ(tail(3)->host.data(), ram.at(0x12000));
  EXPECT_EQ(tail(3)->host.size(), 4u);
  drv.write_desc(3, 0x20000, 16 * (kMaxIndirectDescriptors + 1), VIRTQ_DESC_F_INDIRECT, 0);
  EXPECT_FALSE(tail(3));
  // No tail: device-readable, empty or outside RAM last buffer; a loop; a nested table; a head
  // out of range.
  drv.write_desc(2, 0x12000, 1, 0, 0);
  EXPECT_FALSE(tail(0));
  drv.write_desc(2, 0x12000, 0, VIRTQ_DESC_F_WRITE, 0);
  EXPECT_FALSE(tail(0));
  drv.write_desc(2, 0x10000000, 1, VIRTQ_DESC_F_WRITE, 0);
  EXPECT_FALSE(tail(0));
  drv.write_desc(2, 0x12000, 1, VIRTQ_DESC_F_WRITE | VIRTQ_DESC_F_NEXT, 0);
  EXPECT_FALSE(tail(0));
  (void)ram.mem().write_obj(0x30000, VirtqDesc{0x20000, 48, VIRTQ_DESC_F_INDIRECT, 0});
  drv.write_desc(4, 0x30000, 16, VIRTQ_DESC_F_INDIRECT, 0);
  EXPECT_FALSE(tail(4));
  EXPECT_FALSE(tail(kSize));
}

TEST_F(ChainTest, DescriptorTableOutsideRam) {
  auto c = walk_descriptor_chain(ram.mem(), FakeGuestRam::kHoleStart, kSize, 0, true);
  EXPECT_EQ(c.error(), ChainError::kBadDescriptorTable);
}

}  // namespace
}  // namespace tern::virtio
