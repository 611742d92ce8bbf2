// QueueWorker with NotifyTuning (virtio/notify_tuning.h): kick suppression keeps the driver's
// notifications off while chains are in flight and takes new chains on completions; coalescing
// holds a used-buffer notification while others are in flight and sends it when nothing is left
// in flight or its timer fires; polling takes a chain that arrives while the idle queue is
// watched, and re-enables notifications when the time is up.
#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <thread>

#include "base/testing/eventually.h"
#include "virtio/queue_worker.h"
#include "virtio/testing/queue_worker_rig.h"
#include "virtio/virtio_spec.h"

namespace tern::virtio {
namespace {

using tern::testing::eventually;

// Holds every chain it is given; a write of N to `release` completes the oldest N (one used-ring
// publish for them). in_flight() = chains held.
class StepHandler final : public QueueHandler {
 public:
  explicit StepHandler(int release) : release_(release) {}
  std::vector<std::pair<BorrowedFd, uint32_t>> fds() override {
    return {{BorrowedFd(release_), 7}};
  }
  void serve(QueueWorker&, DescriptorChain chain) override {
    held_.push_back(chain);
    std::lock_guard lock(mu_);
    ++served_;
    cv_.notify_all();
  }
  void on_fd(QueueWorker& w, uint32_t) override {
    uint64_t v = 0;
    if (::read(release_, &v, sizeof v) != sizeof v) return;
    for (; v > 0 && !held_.empty(); --v) {
      w.complete(held_.front().head, 0);
      held_.pop_front();
    }
  }
  void drain(QueueWorker& w) override {
    for (const auto& c : held_) w.complete(c.head, 0);
    held_.clear();
  }
  [[nodiscard]] uint32_t in_flight() const override { return static_cast<uint32_t>(held_.size()); }
  /// Blocks until serve() was called `n` times in all (false after `timeout`).
  bool wait_served(unsigned n, std::chrono::seconds timeout = std::chrono::seconds(20)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return served_ >= n; });
  }

 private:
  int release_;
  std::deque<DescriptorChain> held_;  // worker thread only
  std::mutex mu_;
  std::condition_variable cv_;
  unsigned served_ = 0;
};

// Completes every chain as it is served (a GET_ID, a refused request): nothing stays in flight.
class AtOnceHandler final : public QueueHandler {
 public:
  void serve(QueueWorker& w, DescriptorChain chain) override { w.complete(chain.head, 0); }
};

class QueueWorkerTuningTest : public ::testing::Test, protected tern::testing::QueueWorkerRig {
 protected:
  /// Starts the worker with a StepHandler (handler_), or with `other` when given.
  void start(NotifyTuning tuning, bool event_idx, std::unique_ptr<QueueHandler> other = nullptr) {
    QueueWorkerContext ctx = context(event_idx ? feature(VIRTIO_F_EVENT_IDX) : 0);
    ctx.tuning = tuning;
    std::unique_ptr<QueueHandler> h = std::move(other);
    if (!h) {
      auto step = std::make_unique<StepHandler>(release_.get());
      handler_ = step.get();
      h = std::move(step);
    }
    start_worker(std::move(ctx), std::move(h));
  }
  uint16_t used_flags() const {
    return ram_.mem().read_obj<uint16_t>(drv_.config().used_gpa).value();
  }
  uint16_t add() { return drv_.add_chain({{0x40000, 16, true}}); }

  StepHandler* handler_ = nullptr;
};

TEST_F(QueueWorkerTuningTest, KickSuppressTakesNewChainsOnCompletionWithoutAKick) {
  start(NotifyTuning{.kick_suppress = true}, /*event_idx=*/false);
  add();
  signal(kick_.get());
  ASSERT_TRUE(handler_->wait_served(1));
  // In flight: VIRTQ_USED_F_NO_NOTIFY is set, so the driver adds the next chain without a kick.
  ASSERT_TRUE(eventually([&] { return used_flags() == VIRTQ_USED_F_NO_NOTIFY; }));
  add();
  signal(release_.get());  // the first completes; the worker finds the second itself
  ASSERT_TRUE(handler_->wait_served(2));
  signal(release_.get());  // nothing in flight any more: notifications back on
  ASSERT_TRUE(eventually([&] { return drv_.used_idx() == 2 && used_flags() == 0; }));
  EXPECT_EQ(counters_.snapshot(0).kicks, 1u);
  EXPECT_EQ(counters_.snapshot(0).requests, 2u);
}

TEST_F(QueueWorkerTuningTest, KickSuppressWithEventIdxLeavesAvailEventBehindWhileInFlight) {
  start(NotifyTuning{.kick_suppress = true}, /*event_idx=*/true);
  // Idle at start: avail_event = 0 (the next entry). One chain, taken and held.
  add();
  signal(kick_.get());
  ASSERT_TRUE(handler_->wait_served(1));
  add();  // avail 0 -> 2 crosses nothing new: avail_event stayed 0, behind the driver's old idx 1
  signal(release_.get());
  ASSERT_TRUE(handler_->wait_served(2));
  EXPECT_EQ(drv_.avail_event(), 0);  // not moved while in flight
  signal(release_.get());
  ASSERT_TRUE(eventually([&] { return drv_.used_idx() == 2 && drv_.avail_event() == 2; }));
}

TEST_F(QueueWorkerTuningTest, WithoutKickSuppressNotificationsAreReenabledAfterEachBatch) {
  start(NotifyTuning{}, /*event_idx=*/true);
  add();
  signal(kick_.get());
  ASSERT_TRUE(handler_->wait_served(1));
  ASSERT_TRUE(eventually([&] { return drv_.avail_event() == 1; }));  // the next one kicks
  signal(release_.get());
  ASSERT_TRUE(eventually([&] { return drv_.used_idx() == 1; }));
}

// Without EVENT_IDX every publish asks for a notification; with coalescing the first is held
// while the second chain is in flight, the second folds into it, and it goes out when nothing is
// left in flight. Each completion is published on its own (the second is released only once the
// first is in the used ring), so two notifications were asked for: each is either sent or folded
// into a held one — also when the 10 ms timer sent the first before the second completed.
TEST_F(QueueWorkerTuningTest, CoalescingFoldsCompletionsWhileOthersAreInFlight) {
  start(NotifyTuning{.coalesce_us = 10'000}, /*event_idx=*/false);
  add();
  add();
  signal(kick_.get());
  ASSERT_TRUE(handler_->wait_served(2));
  signal(release_.get());
  ASSERT_TRUE(eventually([&] { return drv_.used_idx() == 1; }));
  signal(release_.get());
  ASSERT_TRUE(eventually([&] { return irq_->used_signals(0) >= 1 && drv_.used_idx() == 2; }));
  worker_.reset();
  auto s = counters_.snapshot(0);
  EXPECT_EQ(s.interrupts + s.interrupts_coalesced, 2u);  // every notification accounted for
  EXPECT_EQ(s.interrupts, irq_->used_signals(0));
}

TEST_F(QueueWorkerTuningTest, CoalescingTimerSendsAHeldNotification) {
  start(NotifyTuning{.coalesce_us = 200}, /*event_idx=*/false);
  add();
  add();
  signal(kick_.get());
  ASSERT_TRUE(handler_->wait_served(2));
  signal(release_.get());  // one completes, one stays in flight: held, then the timer sends it
  ASSERT_TRUE(eventually([&] { return irq_->used_signals(0) == 1; }));
  EXPECT_EQ(drv_.used_idx(), 1);
  EXPECT_EQ(counters_.snapshot(0).interrupts, 1u);
}

TEST_F(QueueWorkerTuningTest, CoalescingSendsAtOnceWhenNothingElseIsInFlight) {
  start(NotifyTuning{.coalesce_us = 10'000}, /*event_idx=*/false);
  add();
  signal(kick_.get());
  ASSERT_TRUE(handler_->wait_served(1));
  signal(release_.get());
  ASSERT_TRUE(eventually([&] { return irq_->used_signals(0) == 1; }));
  EXPECT_EQ(counters_.snapshot(0).interrupts_coalesced, 0u);
}

TEST_F(QueueWorkerTuningTest, PauseSendsAHeldNotification) {
  start(NotifyTuning{.coalesce_us = 10'000}, /*event_idx=*/false);
  add();
  add();
  signal(kick_.get());
  ASSERT_TRUE(handler_->wait_served(2));
  QueuePosition p = worker_->pause();  // drains both: nothing may stay owed while parked
  EXPECT_EQ(p, (QueuePosition{2, 2}));
  EXPECT_GE(irq_->used_signals(0), 1u);
  worker_->resume();
}

// Polling: after the completion the idle worker watches the ring; a chain added then is taken
// without a kick (poll_hits), or, if the poll time ran out first, after the kick the driver then
// sends. Either way each chain is taken once and notifications end up on again.
TEST_F(QueueWorkerTuningTest, PollingTakesAChainWithoutAKickOrFallsBackToTheKick) {
  start(NotifyTuning{.poll_us = 10'000}, /*event_idx=*/true);
  add();
  signal(kick_.get());
  ASSERT_TRUE(handler_->wait_served(1));
  signal(release_.get());
  ASSERT_TRUE(eventually([&] { return drv_.used_idx() == 1; }));
  add();
  // avail_event is where the driver last saw it: the worker re-enables it only after polling.
  bool polled =
      handler_->wait_served(2, std::chrono::seconds(2)) && counters_.snapshot(0).poll_hits == 1;
  if (!polled) signal(kick_.get());
  ASSERT_TRUE(handler_->wait_served(2));
  signal(release_.get());
  ASSERT_TRUE(eventually([&] { return drv_.used_idx() == 2 && drv_.avail_event() == 2; }));
  EXPECT_EQ(counters_.snapshot(0).requests, 2u);
  // The worker, idle again, polls the full poll_us (a hit at once may take no measurable time).
  EXPECT_TRUE(eventually([&] { return counters_.snapshot(0).poll_ns > 0; }));
}

// A guest that adds a chain the device completes at once, each within poll_us of the last, keeps
// the ring busy without a kick: every poll hits. pause() and the destructor still get through (the
// ring loop used to go on polling and serving and never saw them: a snapshot, a device reset or
// shutdown waited as long as the guest liked).
TEST_F(QueueWorkerTuningTest, PauseAndStopGetThroughAGuestThatKeepsTheRingBusy) {
  start(NotifyTuning{.poll_us = 10'000}, /*event_idx=*/true, std::make_unique<AtOnceHandler>());
  std::atomic<bool> feeding{true};
  std::thread guest([&] {
    while (feeding.load()) {
      if (static_cast<uint16_t>(drv_.avail_idx() - drv_.used_idx()) < 8)
        add();
      else
        std::this_thread::yield();
    }
  });
  signal(kick_.get());
  // A few hits show the worker polling a ring the guest keeps busy. Each needs the guest thread
  // to run within poll_us of the last completion, which a loaded 2-core machine does not always
  // grant, so few are asked for and the wait is long (it returns as soon as they are seen).
  if (!eventually([&] { return counters_.snapshot(0).poll_hits >= 10; },
                  std::chrono::minutes(2))) {
    feeding = false;
    guest.join();
    FAIL() << "the worker never polled the busy ring";
  }
  // Each runs on its own thread: against a worker that never yields it would block (then the
  // feeding stops after the failure timeout, which unblocks it).
  auto paused = std::async(std::launch::async, [&] { return worker_->pause(); });
  bool pause_returned = paused.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  if (!pause_returned) feeding = false;
  QueuePosition p = paused.get();
  worker_->resume();
  auto stopped = std::async(std::launch::async, [&] { worker_.reset(); });
  bool stop_returned = stopped.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  feeding = false;
  guest.join();
  stopped.wait();
  EXPECT_TRUE(pause_returned);
  EXPECT_TRUE(stop_returned);
  EXPECT_EQ(p.next_avail, p.next_used);  // every chain taken was completed before it parked
  auto s = counters_.snapshot(0);
  EXPECT_EQ(static_cast<uint16_t>(s.requests), drv_.used_idx());
}

}  // namespace
}  // namespace tern::virtio
