// VhostCallRelay: each count in a call eventfd becomes one signal_used_queue() of its queue, and
// nothing written before the destructor is lost or delivered twice.
#include "virtio/vhost_call_relay.h"

#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "devices/testing/fake_pci_platform.h"
#include "virtio/testing/fake_virtqueue_driver.h"
#include "virtio/testing/signal_counting_interrupt.h"
#include "virtio/transport/virtio_pci_interrupt.h"
#include "virtio/virtio_spec.h"

namespace tern::virtio {
namespace {

using testing::SignalCountingInterrupt;

void kick(const UniqueFd& fd, uint64_t n = 1) {
  ASSERT_EQ(::write(fd.get(), &n, sizeof n), static_cast<ssize_t>(sizeof n));
}

struct Calls {
  UniqueFd a = make_eventfd(0, EFD_NONBLOCK).value();
  UniqueFd b = make_eventfd(0, EFD_NONBLOCK).value();
  std::vector<VhostCallRelay::Call> list() const { return {{3, a.borrow()}, {5, b.borrow()}}; }
};

TEST(VhostCallRelay, EachCallBecomesASignalOfItsQueue) {
  Calls c;
  auto irq = std::make_shared<SignalCountingInterrupt>();
  auto relay = VhostCallRelay::start(c.list(), irq, "virtio-net0");
  ASSERT_TRUE(relay) << relay.error().message();
  kick(c.a);
  ASSERT_EQ(irq->wait_more(3, 0), 1u);
  kick(c.b, 2);  // a count of 2 read at once: one interrupt
  ASSERT_EQ(irq->wait_more(5, 0), 1u);
  kick(c.a);
  ASSERT_EQ(irq->wait_more(3, 1), 2u);
  relay->reset();
  EXPECT_EQ(irq->used(3), 2u);
  EXPECT_EQ(irq->used(5), 1u);
  EXPECT_EQ(irq->used(0), 0u);
}

TEST(VhostCallRelay, CallsBeforeDestructionAreRelayedExactlyOnce) {
  // The thread or the destructor reads the count (eventfd reads are atomic): one signal either way.
  Calls c;
  auto irq = std::make_shared<SignalCountingInterrupt>();
  for (uint64_t round = 1; round <= 100; ++round) {
    auto relay = VhostCallRelay::start(c.list(), irq, "virtio-net0");
    ASSERT_TRUE(relay) << relay.error().message();
    kick(c.a);
    kick(c.b);
    relay->reset();
    EXPECT_EQ(irq->used(3), round);
    EXPECT_EQ(irq->used(5), round);
  }
}

TEST(VhostCallRelay, StopsWithNothingPending) {
  Calls c;
  auto irq = std::make_shared<SignalCountingInterrupt>();
  auto relay = VhostCallRelay::start(c.list(), irq, "virtio-net0");
  ASSERT_TRUE(relay);
  EXPECT_EQ((*relay)->relayed(), 0u);
  relay->reset();
  EXPECT_EQ(irq->used(3) + irq->used(5), 0u);
}

// Issue 31 item 5: vhost-net's vring error eventfd (VHOST_SET_VRING_ERR) is watched: each
// signal becomes on_error(queue), also when it comes just before the relay stops.
TEST(VhostCallRelay, ErrorFdCallsOnErrorWithItsQueue) {
  Calls c;
  UniqueFd err = make_eventfd(0, EFD_NONBLOCK).value();
  std::mutex mu;
  std::condition_variable cv;
  std::vector<uint16_t> seen;
  VhostCallRelay::Options o;
  o.errors = {{7, err.borrow()}};
  o.on_error = [&](uint16_t q) {
    std::lock_guard lock(mu);
    seen.push_back(q);
    cv.notify_all();
  };
  auto irq = std::make_shared<SignalCountingInterrupt>();
  auto relay = VhostCallRelay::start(c.list(), irq, "virtio-net0", std::move(o));
  ASSERT_TRUE(relay) << relay.error().message();
  kick(err);
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(20), [&] { return seen.size() == 1; }));
    EXPECT_EQ(seen[0], 7);
  }
  kick(err, 3);
  relay->reset();  // read by the thread or by the destructor: once
  EXPECT_EQ(seen, (std::vector<uint16_t>{7, 7}));
  EXPECT_EQ(irq->used(3) + irq->used(5), 0u);  // an error is not a used-buffer notification
}

// Issue 31 item 7: with counters, each relayed call is one `interrupts`, and `requests` follows
// the used ring's idx (entries the back-end used, also those it did not notify, 16-bit wrap).
TEST(VhostCallRelay, CountsInterruptsAndUsedEntries) {
  tern::testing::FakeGuestRam ram;
  constexpr uint64_t kUsed = 0x3000;
  auto set_used = [&](uint16_t idx) {
    ASSERT_TRUE(ram.mem().write_obj<uint16_t>(kUsed + used_idx_offset(), idx));
  };
  set_used(65530);  // a restored ring: counting starts where it is
  Calls c;
  QueueCounters qc;
  VhostCallRelay::Options o;
  o.mem = &ram.mem();
  auto irq = std::make_shared<SignalCountingInterrupt>();
  auto relay = VhostCallRelay::start({{3, c.a.borrow(), &qc, kUsed}, {5, c.b.borrow()}}, irq,
                                     "virtio-net0", std::move(o));
  ASSERT_TRUE(relay) << relay.error().message();
  set_used(65534);
  kick(c.a);
  ASSERT_EQ(irq->wait_more(3, 0), 1u);
  set_used(3);  // 5 more, across the wrap, without a notification
  relay->reset();
  EXPECT_EQ(qc.interrupts.load(), 1u);
  EXPECT_EQ(qc.requests.load(), 9u);
}

// Issue 31 item 7: a call relayed while the queue's MSI-X vector is masked is not injected: it
// becomes the vector's Pending bit and is sent when the guest unmasks it (PCI 3.0 §6.8.2), and
// it counts in interrupts_sent. (vhost-net writing the vector's irqfd itself did neither.)
TEST(VhostCallRelay, MaskedVectorGetsThePendingBitAndFiresAtUnmask) {
  FakePciPlatform platform;
  auto table = MsixTable::create(1, platform);
  ASSERT_TRUE(table);
  auto irq = std::make_shared<VirtioPciInterrupt>(std::move(*table), platform, 11, 4);
  MsixTable& m = irq->msix();
  uint32_t entry[4] = {0xfee00000, 0, 0x41, 1};  // masked
  m.table_write(0, std::span(reinterpret_cast<const uint8_t*>(entry), sizeof entry));
  m.set_control(true, false);
  irq->set_queue_vector(3, 0);
  auto fired = [&] {
    uint64_t v = 0;
    return ::read(m.irqfd(0).get(), &v, sizeof v) == sizeof v && v > 0;
  };
  Calls c;
  auto relay = VhostCallRelay::start(c.list(), irq, "virtio-net0");
  ASSERT_TRUE(relay) << relay.error().message();
  kick(c.a);
  relay->reset();
  EXPECT_FALSE(fired()) << "a masked vector was injected";
  EXPECT_TRUE(m.pending(0));
  EXPECT_EQ(irq->interrupts_sent(), 1u);
  entry[3] = 0;  // the guest unmasks: the pending interrupt goes now
  m.table_write(0, std::span(reinterpret_cast<const uint8_t*>(entry), sizeof entry));
  EXPECT_TRUE(fired());
  EXPECT_FALSE(m.pending(0));
}

}  // namespace
}  // namespace tern::virtio
