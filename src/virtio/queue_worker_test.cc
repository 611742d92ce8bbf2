// QueueWorker with a minimal handler: chains are held until the handler's own eventfd fires
// (on_fd), drain() completes what is held before parking, and the per-queue counters follow the
// QueueCountersSnapshot definitions.
#include "virtio/queue_worker.h"

#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "virtio/testing/queue_worker_rig.h"
#include "virtio/virtio_spec.h"

namespace tern::virtio {
namespace {

// Holds every chain; completes them (used len = writable bytes) on drain() and, once `release`
// was signalled, at once.
class HoldingHandler final : public QueueHandler {
 public:
  explicit HoldingHandler(int release) : release_(release) {}
  std::vector<std::pair<BorrowedFd, uint32_t>> fds() override {
    return {{BorrowedFd(release_), 7}};
  }
  void serve(QueueWorker& w, DescriptorChain chain) override {
    held_.push_back(chain);
    if (released_) drain(w);  // the release may be seen before the kick: it is a latch
  }
  void on_fd(QueueWorker& w, uint32_t tag) override {
    EXPECT_EQ(tag, 7u);
    uint64_t v;
    [[maybe_unused]] ssize_t n = ::read(release_, &v, sizeof v);
    released_ = true;
    drain(w);
  }
  void drain(QueueWorker& w) override {
    for (const auto& c : held_)
      w.complete(c.head, static_cast<uint32_t>(c.writable_bytes), c.writable_bytes);
    held_.clear();
  }

 private:
  int release_;
  bool released_ = false;
  std::vector<DescriptorChain> held_;
};

class QueueWorkerTest : public ::testing::Test, protected tern::testing::QueueWorkerRig {
 protected:
  void SetUp() override {
    start_worker(context(feature(VIRTIO_F_EVENT_IDX), /*index=*/3),
                 std::make_unique<HoldingHandler>(release_.get()));
  }
};

TEST_F(QueueWorkerTest, HandlerFdCompletesAndCountersFollow) {
  drv_.set_used_event(0);
  drv_.add_chain({{0x40000, 32, true}});
  signal(kick_.get(), 3);
  signal(release_.get());
  ASSERT_TRUE(irq_->wait_until([&] { return drv_.used_idx() == 1; }));
  EXPECT_EQ(drv_.used_elem(0).len, 32u);
  EXPECT_EQ(irq_->used_signals(3), 1u);  // signal_used_queue(index)
  auto s = counters_.snapshot(3);
  EXPECT_EQ(s.index, 3);
  EXPECT_EQ(s.requests, 1u);
  EXPECT_EQ(s.bytes, 32u);
  EXPECT_EQ(s.interrupts, 1u);
  EXPECT_EQ(s.errors, 0u);
}

TEST_F(QueueWorkerTest, PauseDrainsHeldChainsAndRecordsThePosition) {
  drv_.set_used_event(0);
  drv_.add_chain({{0x40000, 16, true}});
  drv_.add_chain({{0x40100, 16, true}});
  signal(kick_.get());
  // Wait until the worker took both (the handler holds them, so the position says so).
  QueuePosition p;
  for (int i = 0; i < 1000 && (p = worker_->pause()).next_avail != 2; ++i) worker_->resume();
  EXPECT_EQ(p, (QueuePosition{2, 2}));  // drained: both returned before parking
  EXPECT_EQ(drv_.used_idx(), 2);
  worker_->resume();
  worker_.reset();  // stops cleanly
  EXPECT_EQ(counters_.snapshot(0).requests, 2u);
}

TEST_F(QueueWorkerTest, BrokenRingIsReportedOnceAndIgnored) {
  drv_.set_avail_idx(100);
  signal(kick_.get());
  ASSERT_TRUE(irq_->wait_needs_reset());
  signal(kick_.get());
  worker_->pause();  // the worker is still alive and parks
  worker_->resume();
  EXPECT_EQ(counters_.needs_reset.load(), 1u);
  EXPECT_EQ(drv_.used_idx(), 0);
}

}  // namespace
}  // namespace tern::virtio
