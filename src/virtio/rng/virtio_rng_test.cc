// VirtioRng on a fake guest: entropy lands in the device-writable buffers, readable ones are
// ignored, malformed chains and broken rings are handled, the rate limit throttles and resumes,
// quiesce/reset keep the queue consistent.
#include "virtio/rng/virtio_rng_device.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "virtio/rng/virtio_rng.h"
#include "virtio/testing/fake_virtqueue_driver.h"
#include "virtio/virtio_spec.h"
#include "base/testing/eventually.h"
#include "stats/testing/named_counter.h"

namespace tern {
namespace {

using testing::eventually;
constexpr auto named = testing::named_counter;

using testing::FakeGuestRam;
using testing::FakeVirtioInterrupt;
using testing::FakeVirtqueueDriver;
using Buf = FakeVirtqueueDriver::Buf;

constexpr uint16_t kSize = 16;
constexpr uint64_t kRingGpa = 0x1000;
constexpr uint64_t kBufGpa = 0x40000;

class RngTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (dev_) dev_->reset();
  }

  void start(const RngConfig& cfg = {}, VirtioRng::Clock clock = {}) {
    auto d = VirtioRng::create(cfg, "virtio-rng0", std::move(clock));
    ASSERT_TRUE(d) << d.error().message();
    dev_ = *d;
    activate();
  }
  void activate(QueuePosition pos = {}) {
    (void)ram_.mem().write(kRingGpa, std::vector<uint8_t>(0x8000, 0));
    drv_ = std::make_unique<FakeVirtqueueDriver>(ram_.mem(), kRingGpa, kSize);
    auto k = make_eventfd(0, 0);
    ASSERT_TRUE(k);
    kick_.reset(::dup(k->get()));
    std::vector<UniqueFd> kicks;
    kicks.push_back(std::move(*k));
    VirtqueueConfig q = drv_->config();
    q.position = pos;
    auto r = dev_->activate(ram_.mem(), dev_->device_features(), {q}, std::move(kicks), irq_);
    ASSERT_TRUE(r) << r.error().message();
  }
  void kick(uint64_t n = 1) { ASSERT_EQ(::write(kick_.get(), &n, sizeof n), 8); }
  void arm() { drv_->set_used_event(drv_->used_idx()); }
  bool wait_used(uint16_t idx) {
    return irq_->wait_until([&] {
      for (;;) {
        uint16_t seen = drv_->used_idx();
        if (seen == idx) return true;
        drv_->set_used_event(seen);
        std::atomic_thread_fence(std::memory_order_seq_cst);
        if (drv_->used_idx() == seen) return false;
      }
    });
  }
  /// Posts `bufs`, kicks, waits; returns the used length.
  uint32_t request(const std::vector<Buf>& bufs) {
    uint16_t want = static_cast<uint16_t>(drv_->used_idx() + 1);
    arm();
    drv_->add_chain(bufs);
    kick();
    EXPECT_TRUE(wait_used(want));
    return drv_->used_elem(static_cast<uint16_t>(want - 1)).len;
  }
  std::vector<uint8_t> bytes(uint64_t gpa, size_t n) {
    std::vector<uint8_t> b(n);
    (void)ram_.mem().read(gpa, b);
    return b;
  }
  static bool constant(const std::vector<uint8_t>& b) {
    return std::all_of(b.begin(), b.end(), [&](uint8_t v) { return v == b[0]; });
  }

  FakeGuestRam ram_;
  std::shared_ptr<FakeVirtioInterrupt> irq_ = std::make_shared<FakeVirtioInterrupt>();
  std::shared_ptr<VirtioRng> dev_;
  std::unique_ptr<FakeVirtqueueDriver> drv_;
  UniqueFd kick_;
};

TEST(RngConfigTest, IdentityAndValidation) {
  auto d = make_virtio_rng(RngConfig{});
  ASSERT_TRUE(d) << d.error().message();
  EXPECT_EQ((*d)->device_type(), virtio::VIRTIO_ID_ENTROPY);
  EXPECT_EQ((*d)->kind(), "virtio-rng");
  EXPECT_EQ((*d)->num_queues(), 1);
  EXPECT_EQ((*d)->device_features(), virtio::feature(virtio::VIRTIO_F_VERSION_1) |
                                         virtio::feature(virtio::VIRTIO_F_INDIRECT_DESC) |
                                         virtio::feature(virtio::VIRTIO_F_EVENT_IDX));
  uint8_t cfg[4] = {1, 2, 3, 4};
  (*d)->read_config(0, cfg);
  EXPECT_EQ(cfg[0] | cfg[1] | cfg[2] | cfg[3], 0);

  RngConfig bad;
  bad.rate_limiter.bandwidth = TokenBucketConfig{0, 0, 100};
  auto e = make_virtio_rng(bad);
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().op, "--rng");
  EXPECT_NE(e.error().message().find("rate_limiter.bandwidth.size"), std::string::npos);
  bad.rate_limiter.bandwidth.reset();
  bad.rate_limiter.ops = TokenBucketConfig{10, 0, 0};
  e = make_virtio_rng(bad);
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().message().find("rate_limiter.ops.refill_time_ms"), std::string::npos);
}

TEST_F(RngTest, FillsWritableBuffersWithRandomBytes) {
  start();
  EXPECT_EQ(request({{kBufGpa, 64, true}, {kBufGpa + 0x1000, 100, true}}), 164u);
  auto a = bytes(kBufGpa, 64), b = bytes(kBufGpa + 0x1000, 100);
  EXPECT_FALSE(constant(a));
  EXPECT_FALSE(constant(b));
  EXPECT_EQ(request({{kBufGpa, 64, true}}), 64u);
  EXPECT_NE(bytes(kBufGpa, 64), a);  // fresh bytes each time
  auto c = dev_->counters();
  ASSERT_EQ(c.queues.size(), 1u);
  EXPECT_EQ(c.queues[0].requests, 2u);
  EXPECT_EQ(c.queues[0].bytes, 228u);
  EXPECT_EQ(c.queues[0].errors, 0u);
  EXPECT_EQ(named(c, "bytes"), 228u);
}

TEST_F(RngTest, ReadableBuffersAreIgnored) {
  start();
  (void)ram_.mem().write(kBufGpa, std::vector<uint8_t>(32, 0x11));
  EXPECT_EQ(request({{kBufGpa, 32, false}, {kBufGpa + 0x1000, 48, true}}), 48u);
  EXPECT_EQ(bytes(kBufGpa, 32), std::vector<uint8_t>(32, 0x11));
  // Only readable buffers: nothing to fill, used len 0, counted as an error.
  EXPECT_EQ(request({{kBufGpa, 32, false}}), 0u);
  EXPECT_EQ(bytes(kBufGpa, 32), std::vector<uint8_t>(32, 0x11));
  auto c = dev_->counters();
  EXPECT_EQ(c.queues[0].errors, 1u);
  EXPECT_EQ(named(c, "no_buffer"), 1u);
}

TEST_F(RngTest, BytesPerRequestAreCapped) {
  start();
  uint32_t big = 2 * VirtioRng::kMaxBytesPerRequest;
  EXPECT_EQ(request({{kBufGpa, big, true}}), VirtioRng::kMaxBytesPerRequest);
  EXPECT_FALSE(constant(bytes(kBufGpa, VirtioRng::kMaxBytesPerRequest)));
  EXPECT_TRUE(constant(bytes(kBufGpa + VirtioRng::kMaxBytesPerRequest, 4096)));  // untouched
}

TEST_F(RngTest, IndirectChain) {
  start();
  uint16_t want = static_cast<uint16_t>(drv_->used_idx() + 1);
  arm();
  drv_->add_indirect(0x30000, {{kBufGpa, 16, false}, {kBufGpa + 0x100, 40, true}});
  kick();
  ASSERT_TRUE(wait_used(want));
  EXPECT_EQ(drv_->used_elem(0).len, 40u);
}

TEST_F(RngTest, MalformedAndLoopingChainsAreReturned) {
  start();
  // A chain looping on itself, and one whose buffer lies in the RAM hole.
  arm();
  drv_->write_desc(0, kBufGpa, 16, virtio::VIRTQ_DESC_F_WRITE | virtio::VIRTQ_DESC_F_NEXT, 0);
  drv_->push_avail(0);
  drv_->write_desc(1, FakeGuestRam::kHoleStart, 16, virtio::VIRTQ_DESC_F_WRITE, 0);
  drv_->push_avail(1);
  kick();
  ASSERT_TRUE(wait_used(2));
  EXPECT_EQ(drv_->used_elem(0).len, 0u);
  EXPECT_EQ(drv_->used_elem(1).len, 0u);
  EXPECT_FALSE(irq_->needs_reset());
  auto c = dev_->counters();
  EXPECT_EQ(named(c, "malformed_chains"), 2u);
  EXPECT_EQ(c.queues[0].errors, 2u);
  // The device still serves well-formed chains.
  EXPECT_EQ(request({{kBufGpa, 8, true}}), 8u);
}

TEST_F(RngTest, BrokenRingNeedsReset) {
  start();
  drv_->set_avail_idx(kSize + 5);  // more entries than the ring holds
  kick();
  ASSERT_TRUE(irq_->wait_needs_reset());
  EXPECT_TRUE(eventually([&] { return named(dev_->counters(), "needs_reset") == 1; }));
  // Re-activation (after the driver's reset) serves again.
  dev_->reset();
  activate();
  EXPECT_EQ(request({{kBufGpa, 8, true}}), 8u);
}

TEST_F(RngTest, RateLimitThrottlesAndResumes) {
  auto now = std::make_shared<std::atomic<uint64_t>>(1'000'000'000);
  RngConfig cfg;
  cfg.rate_limiter.bandwidth = TokenBucketConfig{16, 0, 1000};  // 16 bytes per second
  start(cfg, [now] { return now->load(); });
  // The full bucket gives 16 bytes to a 64-byte request.
  EXPECT_EQ(request({{kBufGpa, 64, true}}), 16u);
  // Empty bucket: the next chain waits.
  arm();
  drv_->add_chain({{kBufGpa, 64, true}});
  kick();
  ASSERT_TRUE(eventually([&] { return dev_->counters().queues[0].kicks == 2; }));
  EXPECT_GE(named(dev_->counters(), "throttled"), 1u);
  EXPECT_EQ(drv_->used_idx(), 1);
  EXPECT_EQ(dev_->counters().queues[0].requests, 1u);
  // Half a period refills half the bucket.
  now->fetch_add(500'000'000);
  kick();
  ASSERT_TRUE(wait_used(2));
  EXPECT_EQ(drv_->used_elem(1).len, 8u);  // only the refilled tokens: it waited
  EXPECT_EQ(named(dev_->counters(), "bytes"), 24u);
}

TEST_F(RngTest, RateLimitTimerResumesWithoutKicks) {
  RngConfig cfg;
  cfg.rate_limiter.ops = TokenBucketConfig{1, 0, 1};  // one request per millisecond
  start(cfg);
  arm();
  for (int i = 0; i < 4; ++i) drv_->add_chain({{kBufGpa + 0x100ull * i, 32, true}});
  kick();  // one kick; the timerfd wakes the worker for the rest
  ASSERT_TRUE(wait_used(4));
  for (uint16_t i = 0; i < 4; ++i) EXPECT_EQ(drv_->used_elem(i).len, 32u);
  EXPECT_GE(named(dev_->counters(), "throttled"), 1u);
}

TEST_F(RngTest, OneTimeBurstIsSpentFirst) {
  auto now = std::make_shared<std::atomic<uint64_t>>(0);
  RngConfig cfg;
  cfg.rate_limiter.bandwidth = TokenBucketConfig{10, 100, 1000};
  start(cfg, [now] { return now->load(); });
  EXPECT_EQ(request({{kBufGpa, 64, true}}), 64u);
  EXPECT_EQ(request({{kBufGpa, 64, true}}), 46u);  // 36 burst + 10 bucket
}

TEST_F(RngTest, CountersKicksAndInterrupts) {
  start();
  arm();
  drv_->add_chain({{kBufGpa, 8, true}});
  kick(5);  // five notifications coalesced in the eventfd
  ASSERT_TRUE(wait_used(1));
  EXPECT_TRUE(eventually([&] { return dev_->counters().queues[0].kicks == 5; }));
  auto q = dev_->counters().queues[0];
  EXPECT_EQ(q.interrupts, 1u);
  EXPECT_EQ(irq_->used_signals(0), 1u);
  // used_event far away: the driver does not want to hear of the next buffer.
  drv_->set_used_event(100);
  drv_->add_chain({{kBufGpa, 8, true}});
  kick();
  ASSERT_TRUE(eventually([&] { return drv_->used_idx() == 2; }));
  EXPECT_TRUE(eventually([&] { return dev_->counters().queues[0].interrupts_suppressed == 1; }));
  EXPECT_EQ(dev_->counters().queues[0].interrupts, 1u);
}

TEST_F(RngTest, QuiescePositionsAndResetKeepCounters) {
  start();
  EXPECT_EQ(request({{kBufGpa, 8, true}}), 8u);
  EXPECT_EQ(request({{kBufGpa, 8, true}}), 8u);
  dev_->quiesce();
  EXPECT_EQ(dev_->queue_positions(), std::vector<QueuePosition>{(QueuePosition{2, 2})});
  arm();
  drv_->add_chain({{kBufGpa, 8, true}});
  kick();
  EXPECT_EQ(drv_->used_idx(), 2);  // parked: nothing taken
  dev_->unquiesce();
  ASSERT_TRUE(wait_used(3));
  // A restored device continues from saved positions in the same rings.
  dev_->quiesce();
  auto pos = dev_->queue_positions();
  EXPECT_EQ(pos[0], (QueuePosition{3, 3}));
  dev_->reset();
  auto d = VirtioRng::create(RngConfig{});
  ASSERT_TRUE(d);
  auto k = make_eventfd(0, 0);
  ASSERT_TRUE(k);
  kick_.reset(::dup(k->get()));
  std::vector<UniqueFd> kicks;
  kicks.push_back(std::move(*k));
  VirtqueueConfig q = drv_->config();
  q.position = pos[0];
  dev_ = *d;
  ASSERT_TRUE(dev_->activate(ram_.mem(), dev_->device_features(), {q}, std::move(kicks), irq_));
  EXPECT_EQ(request({{kBufGpa, 8, true}}), 8u);
  EXPECT_EQ(drv_->used_idx(), 4);
  // Counters of one device survive reset + re-activation.
  EXPECT_EQ(dev_->counters().queues[0].requests, 1u);
  dev_->reset();
  activate();
  EXPECT_EQ(request({{kBufGpa, 8, true}}), 8u);
  EXPECT_EQ(dev_->counters().queues[0].requests, 2u);
}

}  // namespace
}  // namespace tern

namespace tern {
namespace {

// Every value the configuration checks admit (check_rng_config: up to 2^50, refill_time in ms)
// builds a device: a refill period past 2^64 ns saturates instead of failing after the config
// was accepted.
TEST(RngConfigTest, LargestAdmittedValuesBuildADevice) {
  RngConfig cfg;
  cfg.rate_limiter.bandwidth = TokenBucketConfig{uint64_t{1} << 50, uint64_t{1} << 50,
                                                 uint64_t{1} << 50};
  cfg.rate_limiter.ops = TokenBucketConfig{1, 0, uint64_t{1} << 50};
  auto d = make_virtio_rng(cfg);
  EXPECT_TRUE(d) << d.error().message();
}

// A one_time_burst near 2^64 plus the bucket's tokens must not wrap to a few bytes.
TEST_F(RngTest, HugeBurstIsNotWrapped) {
  auto now = std::make_shared<std::atomic<uint64_t>>(0);
  RngConfig cfg;
  cfg.rate_limiter.bandwidth = TokenBucketConfig{10, UINT64_MAX, 1000};
  start(cfg, [now] { return now->load(); });
  EXPECT_EQ(request({{kBufGpa, 64, true}}), 64u);
  EXPECT_EQ(named(dev_->counters(), "throttled"), 0u);
}

// VirtioDeviceBase::activate refuses a split ring whose size is not a power of two (§2.7),
// whoever the caller is (the transport checks too; a restore or another transport may not).
TEST_F(RngTest, ActivateRefusesNonPowerOfTwoQueueSize) {
  auto d = VirtioRng::create({});
  ASSERT_TRUE(d);
  dev_ = *d;
  (void)ram_.mem().write(kRingGpa, std::vector<uint8_t>(0x8000, 0));
  FakeVirtqueueDriver drv(ram_.mem(), kRingGpa, kSize);
  VirtqueueConfig q = drv.config();
  q.size = 3;
  auto k = make_eventfd(0, 0);
  ASSERT_TRUE(k);
  std::vector<UniqueFd> kicks;
  kicks.push_back(std::move(*k));
  auto r = dev_->activate(ram_.mem(), dev_->device_features(), {q}, std::move(kicks), irq_);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("size 3 not a power of two"), std::string::npos)
      << r.error().message();
}

}  // namespace
}  // namespace tern
