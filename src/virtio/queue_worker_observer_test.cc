// QueueWorker's optional QueueObserver and resubmit list (the vhost-user back-end's inflight
// tracking): resubmitted heads are served first, in the given order, without on_pop; new chains
// get on_pop; every completion is on_used before the publish that makes it visible.
#include <sys/eventfd.h>
#include <unistd.h>

#include <mutex>
#include <string>

#include <gtest/gtest.h>

#include "virtio/queue_worker.h"
#include "virtio/testing/fake_virtqueue_driver.h"
#include "virtio/virtio_spec.h"

namespace tern::virtio {
namespace {

using tern::testing::FakeGuestRam;
using tern::testing::FakeVirtioInterrupt;
using tern::testing::FakeVirtqueueDriver;

class ImmediateHandler final : public QueueHandler {
 public:
  void serve(QueueWorker& w, DescriptorChain chain) override { w.complete(chain.head, 0); }
};

class RecordingObserver final : public QueueObserver {
 public:
  void on_pop(uint16_t head) override { add("pop " + std::to_string(head)); }
  void on_used(uint16_t head) override { add("used " + std::to_string(head)); }
  void on_before_publish(uint16_t idx) override { add("before " + std::to_string(idx)); }
  void on_published(uint16_t idx) override { add("published " + std::to_string(idx)); }
  std::vector<std::string> events() {
    std::lock_guard lock(mu_);
    return events_;
  }

 private:
  void add(std::string e) {
    std::lock_guard lock(mu_);
    events_.push_back(std::move(e));
  }
  std::mutex mu_;
  std::vector<std::string> events_;
};

TEST(QueueWorkerObserverTest, ResubmittedHeadsComeFirstAndEveryStepIsObserved) {
  FakeGuestRam ram;
  FakeVirtqueueDriver drv(ram.mem(), 0x1000, 8);
  // Heads 0 and 1 were taken by a previous server (next_avail 2) and never returned; head 2 is new.
  drv.add_chain({{0x40000, 16, true}});
  drv.add_chain({{0x40100, 16, true}});
  drv.add_chain({{0x40200, 16, true}});
  auto irq = std::make_shared<FakeVirtioInterrupt>();
  RateLimit limit;
  QueueCounters counters;
  RecordingObserver observer;
  QueueWorkerContext ctx;
  ctx.mem = &ram.mem();
  ctx.interrupt = irq;
  ctx.queue = drv.config();
  ctx.queue.position = QueuePosition{2, 0};
  ctx.features = feature(VIRTIO_F_VERSION_1);
  ctx.name = "test";
  ctx.log_limit = &limit;
  ctx.counters = &counters;
  ctx.observer = &observer;
  ctx.resubmit = {1, 0};
  auto kick = make_eventfd(0, 0);
  ASSERT_TRUE(kick);
  auto w = QueueWorker::start(std::move(ctx), std::move(*kick), std::make_unique<ImmediateHandler>());
  ASSERT_TRUE(w) << w.error().message();
  ASSERT_TRUE(irq->wait_until([&] { return drv.used_idx() == 3; }));
  w->reset();  // joined: the events are final
  EXPECT_EQ(drv.used_elem(0).id, 1u);
  EXPECT_EQ(drv.used_elem(1).id, 0u);
  EXPECT_EQ(drv.used_elem(2).id, 2u);
  EXPECT_EQ(observer.events(), (std::vector<std::string>{"used 1", "used 0", "pop 2", "used 2",
                                                          "before 3", "published 3"}));
  EXPECT_EQ(counters.snapshot(0).requests, 3u);
}

}  // namespace
}  // namespace tern::virtio
