// VirtioPciInterrupt: a queue interrupt raised while a vCPU clears MSI-X Enable is delivered —
// through the vector if it was still enabled, else on INTx with the ISR queue bit — never parked
// as a PBA bit of a disabled capability.
#include "virtio/transport/virtio_pci_interrupt.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "devices/pci/pci_registers.h"
#include "devices/testing/fake_pci_platform.h"
#include "virtio/transport/virtio_pci_registers.h"

namespace tern {
namespace {

constexpr uint32_t kIntx = 11;

struct Rig {
  FakePciPlatform platform;
  std::unique_ptr<VirtioPciInterrupt> irq;
  Rig() {
    auto t = MsixTable::create(2, platform);
    EXPECT_TRUE(t);
    irq = std::make_unique<VirtioPciInterrupt>(std::move(*t), platform, kIntx, 1);
  }
  /// MSI-X enabled, vector 0 unmasked with a route, queue 0 on vector 0, nothing pending.
  void arm() {
    MsixTable& m = irq->msix();
    uint32_t entry[4] = {0xfee00000, 0, 0x41, 0};  // address, data, unmasked
    m.table_write(0, std::span(reinterpret_cast<const uint8_t*>(entry), sizeof entry));
    m.set_control(true, false);
    irq->set_queue_vector(0, 0);
    drain_irqfd();
    (void)irq->read_and_clear_isr();
  }
  bool drain_irqfd() {
    uint64_t v = 0;
    return ::read(irq->msix().irqfd(0).get(), &v, sizeof v) == sizeof v && v > 0;
  }
};

TEST(VirtioPciInterrupt, QueueInterruptGoesToIntxWhenMsixIsDisabled) {
  Rig r;
  r.arm();
  r.irq->msix().set_control(false, false);
  r.irq->signal_used_queue(0);
  EXPECT_FALSE(r.drain_irqfd());
  EXPECT_FALSE(r.irq->msix().pending(0));
  EXPECT_EQ(r.irq->read_and_clear_isr() & virtio_pci::kIsrQueue, virtio_pci::kIsrQueue);
}

TEST(VirtioPciInterrupt, ClearingMsixEnableWhileSignallingLosesNoInterrupt) {
  // A worker signals queue 0 without pause while a vCPU clears MSI-X Enable, many times over.
  // Once Enable is clear, a signal must go to INTx, never into the PBA (vector 0 is unmasked, so
  // with MSI-X enabled it is never pending either): a PBA bit while disabled is a lost interrupt.
  // Before the fix, a clear landing between enabled() and fire() did exactly that.
  Rig r;
  constexpr int kTrials = 20000;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> signals{0};
  std::thread worker([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      r.irq->signal_used_queue(0);
      signals.fetch_add(1, std::memory_order_release);
    }
  });
  auto wait_signals = [&](uint64_t n) {
    uint64_t start = signals.load(std::memory_order_acquire);
    while (signals.load(std::memory_order_acquire) < start + n) {
    }
  };
  int lost = 0;
  for (int i = 0; i < kTrials; ++i) {
    r.arm();
    wait_signals(1);
    r.irq->msix().set_control(false, false);  // the vCPU's Message Control write
    wait_signals(2);  // the signal in progress at the clear, and one after it
    if (r.irq->msix().pending(0)) ++lost;
  }
  stop.store(true);
  worker.join();
  EXPECT_EQ(lost, 0) << "of " << kTrials << " clears of MSI-X Enable";
}

// queue_irqfd(): the vector's irqfd only while MSI-X is enabled and the queue has a vector in the
// table (vhost-net's VHOST_SET_VRING_CALL), else -1 (the backend relays to signal_used_queue).
TEST(VirtioPciInterrupt, QueueIrqfdIsTheVectorsIrqfdOnlyWithMsix) {
  Rig r;
  EXPECT_LT(r.irq->queue_irqfd(0).get(), 0);  // MSI-X disabled, no vector
  r.arm();
  EXPECT_EQ(r.irq->queue_irqfd(0).get(), r.irq->msix().irqfd(0).get());
  EXPECT_GE(r.irq->queue_irqfd(0).get(), 0);
  EXPECT_LT(r.irq->queue_irqfd(1).get(), 0);  // no such queue
  r.irq->set_queue_vector(0, 1);
  EXPECT_EQ(r.irq->queue_irqfd(0).get(), r.irq->msix().irqfd(1).get());
  r.irq->set_queue_vector(0, 2);  // outside the 2-vector table: NO_VECTOR
  EXPECT_LT(r.irq->queue_irqfd(0).get(), 0);
  r.irq->set_queue_vector(0, virtio_pci::VIRTIO_MSI_NO_VECTOR);
  EXPECT_LT(r.irq->queue_irqfd(0).get(), 0);
  r.irq->set_queue_vector(0, 0);
  r.irq->msix().set_control(false, false);  // INTx again
  EXPECT_LT(r.irq->queue_irqfd(0).get(), 0);
}

// watch_queue_irqfd(): the queue's vector irqfd while it is deliverable, -1 while it is masked
// or MSI-X is disabled (vhost's call then goes through signal_used_queue()), at once and at each
// change; nothing for a queue without a vector; nothing after unwatch.
TEST(VirtioPciInterrupt, WatchQueueIrqfdFollowsTheVectorsMask) {
  Rig r;
  std::vector<int> told;
  auto watch = [&](BorrowedFd fd) { told.push_back(fd.get()); };
  EXPECT_EQ(r.irq->watch_queue_irqfd(0, watch), 0u);  // no vector yet
  r.arm();
  uint64_t id = r.irq->watch_queue_irqfd(0, watch);
  ASSERT_NE(id, 0u);
  const int irqfd = r.irq->msix().irqfd(0).get();
  EXPECT_EQ(told, std::vector<int>{irqfd});
  uint32_t masked = pci::kMsixVectorMasked;
  r.irq->msix().table_write(12, std::span(reinterpret_cast<const uint8_t*>(&masked), 4));
  r.irq->msix().set_control(false, false);  // stays undeliverable: not told again
  r.irq->msix().set_control(true, false);
  uint32_t unmasked = 0;
  r.irq->msix().table_write(12, std::span(reinterpret_cast<const uint8_t*>(&unmasked), 4));
  EXPECT_EQ(told, (std::vector<int>{irqfd, -1, irqfd}));
  r.irq->unwatch_queue_irqfd(id);
  r.irq->msix().set_control(false, false);
  EXPECT_EQ(told.size(), 3u);
}

}  // namespace
}  // namespace tern
