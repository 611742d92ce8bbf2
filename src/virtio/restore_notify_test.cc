// Used-buffer notifications across a snapshot restore (issue 31 item 12): a queue restored from a
// snapshot whose used-buffer notification was owed (used->idx moved past used_event, the
// interrupt not in the saved state) notifies the driver once before the guest runs, and is not
// stalled for good by EVENT_IDX suppression afterwards. Any VirtioDeviceBase device (blk, net,
// rng, vhost-user-blk) gets this from activate().
#include <gtest/gtest.h>
#include <unistd.h>

#include "base/testing/eventually.h"
#include "virtio/testing/fake_virtqueue_driver.h"
#include "virtio/virtio_device_base.h"
#include "virtio/virtio_spec.h"

namespace tern::virtio {
namespace {

using tern::testing::eventually;
using tern::testing::FakeGuestRam;
using tern::testing::FakeVirtioInterrupt;
using tern::testing::FakeVirtqueueDriver;

// Returns every chain at once (used len 0).
class EchoHandler final : public QueueHandler {
 public:
  void serve(QueueWorker& w, DescriptorChain chain) override { w.complete(chain.head, 0); }
};

// The smallest VirtioDeviceBase: two queues, EVENT_IDX offered, echo handlers.
class EchoDevice final : public VirtioDeviceBase {
 public:
  EchoDevice()
      : VirtioDeviceBase(4, "echo0", feature(VIRTIO_F_VERSION_1) | feature(VIRTIO_F_EVENT_IDX),
                         2, 8) {}
  ~EchoDevice() override { reset(); }
  void read_config(uint64_t, std::span<uint8_t>) override {}
  void write_config(uint64_t, std::span<const uint8_t>) override {}

 protected:
  Result<std::unique_ptr<QueueHandler>> make_queue_handler(uint16_t, const VirtqueueConfig&,
                                                           uint64_t) override {
    return std::make_unique<EchoHandler>();
  }
};

class RestoreNotifyTest : public ::testing::Test {
 protected:
  void TearDown() override { dev_.reset(); }

  // The guest's view at the save: the driver made one chain available and armed used_event for
  // it (used_event 0); the device returned it (used->idx 1). The interrupt for it is not in the
  // saved state (it was owed, or lost on the way).
  void guest_state_at_save() {
    drv_.add_chain({{0x40000, 16, true}});
    drv_.set_used_event(0);
    ASSERT_TRUE(ram_.mem().write_obj(drv_.config().used_gpa + used_ring_offset(0),
                                     VirtqUsedElem{0, 0}));
    ASSERT_TRUE(ram_.mem().write_obj(drv_.config().used_gpa + used_idx_offset(), uint16_t{1}));
  }

  // Activates queue 0 at {1, 1} (queue 1 disabled) as a restore (`restored`) or a DRIVER_OK.
  void activate(bool restored) {
    VirtqueueConfig q0 = drv_.config();
    q0.position = QueuePosition{1, 1};
    q0.restored = restored;
    VirtqueueConfig q1{};
    q1.restored = restored;
    auto k = make_eventfd(0, 0);
    ASSERT_TRUE(k);
    kick_.reset(::dup(k->get()));
    std::vector<UniqueFd> kicks;
    kicks.push_back(std::move(*k));
    kicks.emplace_back();
    auto r = dev_.activate(ram_.mem(), dev_.device_features(), {q0, q1}, std::move(kicks), irq_);
    ASSERT_TRUE(r) << r.error().message();
  }

  FakeGuestRam ram_;
  FakeVirtqueueDriver drv_{ram_.mem(), 0x1000, 8};
  std::shared_ptr<FakeVirtioInterrupt> irq_ = std::make_shared<FakeVirtioInterrupt>();
  EchoDevice dev_;
  UniqueFd kick_;
};

TEST_F(RestoreNotifyTest, RestoredQueueNotifiesOnceBeforeTheGuestRuns) {
  guest_state_at_save();
  activate(/*restored=*/true);
  // Sent by activate() itself (the restoring thread, before any vCPU runs). Not a used-ring
  // publish: the queue's interrupts counter (≤ requests) leaves it out.
  EXPECT_EQ(irq_->used_signals(0), 1u);
  EXPECT_EQ(dev_.queue_counters(0).interrupts.load(), 0u);
  EXPECT_EQ(irq_->used_signals(1), 0u);  // not enabled: nothing to notify
}

TEST_F(RestoreNotifyTest, ADriverOkActivationSendsNoNotification) {
  guest_state_at_save();
  activate(/*restored=*/false);
  dev_.quiesce();  // the worker's first pass (nothing new in the ring) is over
  EXPECT_EQ(irq_->used_signals(0), 0u);
  EXPECT_EQ(dev_.queue_counters(0).interrupts.load(), 0u);
}

// Without the restore notification the queue stalls for good: the driver still waits for the
// interrupt of entry 0 (used_event 0), and with EVENT_IDX every later completion is suppressed,
// since used->idx already passed used_event (vring_need_event(0, 2, 1) is false).
TEST_F(RestoreNotifyTest, NotificationOwedAtSaveDoesNotStallTheQueue) {
  guest_state_at_save();
  activate(/*restored=*/true);
  drv_.add_chain({{0x40100, 16, true}});
  uint64_t one = 1;
  ASSERT_EQ(::write(kick_.get(), &one, sizeof one), 8);
  ASSERT_TRUE(eventually([&] { return drv_.used_idx() == 2; }));
  dev_.quiesce();  // the worker's notification decision for entry 1 is made
  EXPECT_GE(irq_->used_signals(0), 1u);
  EXPECT_EQ(dev_.queue_positions()[0], (QueuePosition{2, 2}));
}

}  // namespace
}  // namespace tern::virtio
