// VhostCallRelay: each count in a call eventfd becomes one signal_used_queue() of its queue, and
// nothing written before the destructor is lost or delivered twice.
#include "virtio/vhost_call_relay.h"

#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "virtio/testing/signal_counting_interrupt.h"

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

}  // namespace
}  // namespace tern::virtio
