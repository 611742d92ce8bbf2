#include "virtio/queue.h"

#include <gtest/gtest.h>

#include "virtio/testing/fake_virtqueue_driver.h"
#include "virtio/virtio_spec.h"

namespace tern::virtio {
namespace {

using testing::FakeGuestRam;
using testing::FakeVirtqueueDriver;
using Kind = PopResult::Kind;

constexpr uint16_t kSize = 8;

class QueueTest : public ::testing::Test {
 protected:
  FakeGuestRam ram;
  FakeVirtqueueDriver drv{ram.mem(), 0x1000, kSize};
  uint64_t features = feature(VIRTIO_F_VERSION_1) | feature(VIRTIO_F_INDIRECT_DESC);
  Virtqueue vq() { return Virtqueue(ram.mem(), drv.config(), features); }
};

TEST_F(QueueTest, ValidateRejectsBadLayouts) {
  EXPECT_TRUE(vq().validate());
  VirtqueueConfig c = drv.config();
  c.size = 6;
  EXPECT_FALSE(Virtqueue(ram.mem(), c, features).validate());
  c = drv.config();
  c.used_gpa = FakeGuestRam::kHoleStart - 16;
  EXPECT_FALSE(Virtqueue(ram.mem(), c, features).validate());
  c = drv.config();
  c.desc_gpa = UINT64_MAX - 64;
  EXPECT_FALSE(Virtqueue(ram.mem(), c, features).validate());
}

TEST_F(QueueTest, PopAddUsedPublish) {
  auto q = vq();
  EXPECT_EQ(q.pop().kind, Kind::kEmpty);
  uint16_t h = drv.add_chain({{0x10000, 16, false}, {0x11000, 1, true}});
  auto p = q.pop();
  ASSERT_EQ(p.kind, Kind::kChain);
  EXPECT_EQ(p.chain.head, h);
  EXPECT_EQ(q.pop().kind, Kind::kEmpty);
  ASSERT_TRUE(q.add_used(h, 1));
  EXPECT_EQ(drv.used_idx(), 0);  // not published yet
  auto notify = q.publish_used();
  ASSERT_TRUE(notify);
  EXPECT_TRUE(*notify);
  EXPECT_EQ(drv.used_idx(), 1);
  EXPECT_EQ(drv.used_elem(0).id, h);
  EXPECT_EQ(drv.used_elem(0).len, 1u);
  EXPECT_FALSE(*q.publish_used());  // nothing new
}

TEST_F(QueueTest, MalformedChainConsumedOnce) {
  auto q = vq();
  drv.write_desc(0, 0x10000, 16, VIRTQ_DESC_F_NEXT, 0);  // self-loop
  drv.push_avail(0);
  auto p = q.pop();
  EXPECT_EQ(p.kind, Kind::kMalformed);
  EXPECT_EQ(p.head, 0);
  EXPECT_EQ(p.error, ChainError::kTooLong);
  EXPECT_EQ(q.pop().kind, Kind::kEmpty);  // never re-parsed
  EXPECT_EQ(q.last_avail_idx(), 1);
}

TEST_F(QueueTest, AvailIndexJumpingAheadIsFatal) {
  auto q = vq();
  drv.set_avail_idx(kSize + 1);
  EXPECT_EQ(q.pop().kind, Kind::kFatal);
  EXPECT_EQ(q.last_avail_idx(), 0);
}

TEST_F(QueueTest, AvailIndexExactlyQueueSizeIsFine) {
  auto q = vq();
  for (int i = 0; i < kSize; ++i) drv.add_chain({{0x10000, 16, false}});
  for (int i = 0; i < kSize; ++i) EXPECT_EQ(q.pop().kind, Kind::kChain);
  EXPECT_EQ(q.pop().kind, Kind::kEmpty);
}

TEST_F(QueueTest, HeadOutOfRangeIsFatal) {
  auto q = vq();
  drv.push_avail(kSize + 3);
  EXPECT_EQ(q.pop().kind, Kind::kFatal);
}

TEST_F(QueueTest, FreeRunningIndicesWrap) {
  auto q = vq();
  for (int i = 0; i < 70000; ++i) {
    uint16_t h = drv.add_chain({{0x10000, 16, false}});
    auto p = q.pop();
    ASSERT_EQ(p.kind, Kind::kChain) << i;
    ASSERT_TRUE(q.add_used(h, 0));
    ASSERT_TRUE(q.publish_used());
  }
  EXPECT_EQ(drv.used_idx(), static_cast<uint16_t>(70000));
}

TEST_F(QueueTest, NoInterruptFlagSuppressesWithoutEventIdx) {
  auto q = vq();
  drv.set_avail_flags(VIRTQ_AVAIL_F_NO_INTERRUPT);
  uint16_t h = drv.add_chain({{0x10000, 16, false}});
  ASSERT_EQ(q.pop().kind, Kind::kChain);
  ASSERT_TRUE(q.add_used(h, 0));
  EXPECT_FALSE(*q.publish_used());
  EXPECT_EQ(drv.used_idx(), 1);
}

TEST_F(QueueTest, EventIdxUsedEvent) {
  features |= feature(VIRTIO_F_EVENT_IDX);
  auto q = vq();
  drv.set_avail_flags(VIRTQ_AVAIL_F_NO_INTERRUPT);  // ignored with EVENT_IDX
  drv.set_used_event(1);  // driver wants an interrupt once used->idx passes 1
  for (int i = 0; i < 3; ++i) drv.add_chain({{0x10000, 16, false}});
  ASSERT_EQ(q.pop().kind, Kind::kChain);
  ASSERT_TRUE(q.add_used(0, 0));
  EXPECT_FALSE(*q.publish_used());  // used 0 -> 1: not past used_event
  ASSERT_EQ(q.pop().kind, Kind::kChain);
  ASSERT_TRUE(q.add_used(1, 0));
  EXPECT_TRUE(*q.publish_used());  // 1 -> 2 crosses used_event = 1
  ASSERT_EQ(q.pop().kind, Kind::kChain);
  ASSERT_TRUE(q.add_used(2, 0));
  EXPECT_FALSE(*q.publish_used());  // driver did not move used_event
}

TEST_F(QueueTest, EventIdxAvailEventAndRecheck) {
  features |= feature(VIRTIO_F_EVENT_IDX);
  auto q = vq();
  drv.add_chain({{0x10000, 16, false}});
  ASSERT_EQ(q.pop().kind, Kind::kChain);
  auto more = q.enable_notification();
  ASSERT_TRUE(more);
  EXPECT_FALSE(*more);
  EXPECT_EQ(drv.avail_event(), 1);
  drv.add_chain({{0x10000, 16, false}});
  EXPECT_TRUE(*q.enable_notification());
}

TEST(VringNeedEvent, MatchesSpecFormula) {
  EXPECT_TRUE(vring_need_event(0, 1, 0));
  EXPECT_FALSE(vring_need_event(5, 3, 0));
  EXPECT_TRUE(vring_need_event(5, 6, 3));
  EXPECT_TRUE(vring_need_event(65535, 2, 65534));  // wraps
}

}  // namespace
}  // namespace tern::virtio
