// QueueWorkerRig: what a unit test of QueueWorker needs around the worker: fake guest RAM with one
// split virtqueue of 8 entries at guest-physical 0x1000 (FakeVirtqueueDriver), a recording
// interrupt, the queue's counters and log limit, the kick eventfd the guest would signal and a
// non-blocking `release_` eventfd a test handler can register to be told to complete chains.
// A test fixture derives from it and from ::testing::Test.
#pragma once

#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <memory>

#include "base/fd.h"
#include "base/log.h"
#include "virtio/queue_worker.h"
#include "virtio/testing/fake_virtqueue_driver.h"
#include "virtio/virtio_spec.h"

namespace tern::testing {

/// See the file comment.
class QueueWorkerRig {
 protected:
  /// A worker context on this rig's queue: VIRTIO_F_VERSION_1 plus `features`, queue index
  /// `index`, named "test"; the caller adds tuning, an observer, a resubmit list.
  virtio::QueueWorkerContext context(uint64_t features = 0, uint16_t index = 0) {
    virtio::QueueWorkerContext ctx;
    ctx.mem = &ram_.mem();
    ctx.interrupt = irq_;
    ctx.queue = drv_.config();
    ctx.index = index;
    ctx.features = virtio::feature(virtio::VIRTIO_F_VERSION_1) | features;
    ctx.name = "test";
    ctx.log_limit = &limit_;
    ctx.counters = &counters_;
    return ctx;
  }
  /// Makes kick_ and release_ and starts a worker with `ctx` and `handler` (the worker owns a
  /// duplicate of the kick eventfd); a failure fails the test and leaves worker_ empty.
  void start_worker(virtio::QueueWorkerContext ctx, std::unique_ptr<virtio::QueueHandler> handler) {
    auto k = make_eventfd(0, 0);
    ASSERT_TRUE(k) << k.error().message();
    kick_.reset(::dup(k->get()));
    auto w = virtio::QueueWorker::start(std::move(ctx), std::move(*k), std::move(handler));
    ASSERT_TRUE(w) << w.error().message();
    worker_ = std::move(*w);
  }
  /// Adds `v` to eventfd `fd` (a kick, a release).
  void signal(int fd, uint64_t v = 1) { ASSERT_EQ(::write(fd, &v, sizeof v), 8); }

  FakeGuestRam ram_;
  FakeVirtqueueDriver drv_{ram_.mem(), 0x1000, 8};
  std::shared_ptr<FakeVirtioInterrupt> irq_ = std::make_shared<FakeVirtioInterrupt>();
  RateLimit limit_;
  virtio::QueueCounters counters_;
  UniqueFd kick_;
  UniqueFd release_ = make_eventfd(0, EFD_NONBLOCK).value();
  std::unique_ptr<virtio::QueueWorker> worker_;
};

}  // namespace tern::testing
