#include "vhost_user/backend/inflight.h"

#include <sys/mman.h>

#include <gtest/gtest.h>

#include "virtio/testing/fake_virtqueue_driver.h"
#include "virtio/virtio_spec.h"

namespace tern::vhost_user {
namespace {

TEST(InflightTest, CreateInitializesEveryQueueRegion) {
  auto r = InflightRegion::create(2, 64);
  ASSERT_TRUE(r.has_value()) << r.error().message();
  EXPECT_EQ(r->info().mmap_size, 2 * inflight_queue_region_bytes(64));
  for (uint16_t q = 0; q < 2; ++q) {
    auto* h = reinterpret_cast<QueueRegionSplit*>(r->queue(q));
    EXPECT_EQ(h->version, 1);
    EXPECT_EQ(h->desc_num, 64);
  }
  EXPECT_FALSE(InflightRegion::create(1, 48).has_value());  // not a power of two
  VhostUserInflight small = r->info();
  small.mmap_size = 16;
  EXPECT_FALSE(InflightRegion::map(small, UniqueFd(::dup(r->fd().get()))).has_value());
}

// A back-end died after publishing used->idx 2 (heads 3 and 4) but before clearing them: only
// head 5 is still in flight; heads 3 and 4 must not be served twice.
TEST(InflightTest, RecoverClearsPublishedHeadsAndReturnsTheRestInCounterOrder) {
  tern::testing::FakeGuestRam ram;
  tern::testing::FakeVirtqueueDriver drv(ram.mem(), 0x1000, 8);
  ASSERT_TRUE(ram.mem().write_obj(drv.config().used_gpa + virtio::used_ring_offset(0),
                                  virtio::VirtqUsedElem{3, 0}).has_value());
  ASSERT_TRUE(ram.mem().write_obj(drv.config().used_gpa + virtio::used_ring_offset(1),
                                  virtio::VirtqUsedElem{4, 0}).has_value());
  auto r = InflightRegion::create(1, 8);
  ASSERT_TRUE(r.has_value());
  auto* h = reinterpret_cast<QueueRegionSplit*>(r->queue(0));
  auto* d = reinterpret_cast<DescStateSplit*>(r->queue(0) + sizeof(QueueRegionSplit));
  d[3] = DescStateSplit{1, {}, 0, 10};
  d[4] = DescStateSplit{1, {}, 0, 11};
  d[5] = DescStateSplit{1, {}, 0, 12};
  d[6] = DescStateSplit{1, {}, 0, 9};
  h->used_idx = 0;
  h->last_batch_head = 4;
  InflightQueue q(r->queue(0), 8);
  uint16_t next_avail = 0;
  auto heads = q.recover(ram.mem(), drv.config().used_gpa, 2, next_avail);
  EXPECT_EQ(heads, (std::vector<uint16_t>{6, 5}));
  EXPECT_EQ(next_avail, 4);  // used_idx 2 + two in flight
  EXPECT_EQ(d[3].inflight, 0);
  EXPECT_EQ(d[4].inflight, 0);
  EXPECT_EQ(h->used_idx, 2);
  // Tracking continues after the highest counter.
  q.on_pop(1);
  EXPECT_EQ(d[1].inflight, 1);
  EXPECT_EQ(d[1].counter, 13u);
  q.on_used(1);
  q.on_before_publish(3);
  EXPECT_EQ(h->last_batch_head, 1);
  q.on_published(3);
  EXPECT_EQ(d[1].inflight, 0);
  EXPECT_EQ(h->used_idx, 3);
}

}  // namespace
}  // namespace tern::vhost_user
