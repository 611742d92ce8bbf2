// virtio-blk snapshot, end to end without KVM: requests in flight, quiesce (everything completes,
// positions reported, kicks stay pending), save the transport, then a fresh device + transport
// restored from the bytes keeps serving the same rings with used indices continuing.
#include <gtest/gtest.h>

#include <algorithm>

#include "devices/testing/fake_pci_platform.h"
#include "virtio/block/testing/block_test_fixture.h"
#include "virtio/transport/testing/virtio_pci_test_driver.h"

namespace tern::testing {
namespace {

using virtio::VIRTIO_BLK_S_OK;
using virtio::VIRTIO_BLK_T_IN;
using virtio::VIRTIO_BLK_T_OUT;
namespace vp = virtio_pci;

constexpr uint64_t kWindow = 0xC0000000;
constexpr uint32_t kReqBytes = 4096;

/// Positions of a one-queue device.
std::vector<QueuePosition> at(uint16_t next_avail, uint16_t next_used) {
  return {QueuePosition{next_avail, next_used}};
}

class BlockSnapshotTest : public BlockDeviceTest,
                          public ::testing::WithParamInterface<IoEngineKind> {
 protected:
  /// One "VM process": device, transport and the PCI bus it sits on.
  struct Vm {
    FakePciPlatform platform;
    PciRoot root{kWindow, 0x10000000};
    std::shared_ptr<VirtioBlock> dev;
    std::shared_ptr<VirtioPciTransport> transport;
    uint8_t slot = 0;
    VirtioPciTestDriver pci() { return {root, slot}; }
    /// The irqfd behind queue 0's MSI-X vector (1).
    int queue_irqfd() { return transport->interrupt().msix().irqfd(1).get(); }
  };

  std::unique_ptr<Vm> make_vm() {
    auto vm = std::make_unique<Vm>();
    DiskConfig c = config();
    c.engine = GetParam();
    auto d = VirtioBlock::create(c);
    EXPECT_TRUE(d) << d.error().message();
    if (!d) return nullptr;
    vm->dev = *d;
    VirtioPciPlacement p{.virtio_bar_gpa = static_cast<uint32_t>(kWindow),
                         .msix_bar_gpa = static_cast<uint32_t>(kWindow + vp::kVirtioBarSize),
                         .intx_irq = 10};
    vm->transport = VirtioPciTransport::create(vm->dev, ram_.mem(), vm->platform, p).value();
    vm->slot = vm->root.add(vm->transport).value();
    return vm;
  }

  static uint8_t fill(unsigned i) { return static_cast<uint8_t>(i * 31 + 7); }
  static uint64_t header(unsigned slot) { return kHeaderGpa + 16ull * slot; }
  static uint64_t status(unsigned slot) { return kStatusGpa + slot; }
  static uint64_t data(unsigned slot) { return kDataGpa + uint64_t{kReqBytes} * slot; }

  /// Queues (without notifying) a 4 KiB request using buffer slot `slot` (0..15); returns head.
  uint16_t queue_request(uint32_t type, uint64_t sector, unsigned slot) {
    (void)ram_.mem().write_obj(header(slot), virtio::VirtioBlkOuthdr{type, 0, sector});
    (void)ram_.mem().write_obj<uint8_t>(status(slot), 0xff);
    return drv().add_chain({{header(slot), 16, false},
                            {data(slot), kReqBytes, type == VIRTIO_BLK_T_IN},
                            {status(slot), 1, true}});
  }
  /// Writes block `block` (4 KiB) filled with fill(block), through buffer slot `slot`.
  uint16_t queue_write(unsigned block, unsigned slot) {
    (void)ram_.mem().write(data(slot), std::vector<uint8_t>(kReqBytes, fill(block)));
    return queue_request(VIRTIO_BLK_T_OUT, 8ull * block, slot);
  }
  /// Waits (on the queue's irqfd, no sleeps) until used->idx reaches `idx`.
  bool wait_used_irqfd(Vm& vm, uint16_t idx) {
    while (drv().used_idx() != idx)
      if (!wait_eventfd(vm.queue_irqfd())) return false;
    return true;
  }
  /// Used elements [from, from + heads.size()) name exactly `heads` (in any order: requests
  /// complete out of order) and every request reported success.
  void expect_completed(uint16_t from, std::vector<uint16_t> heads,
                        const std::vector<unsigned>& slots) {
    std::vector<uint16_t> used;
    for (size_t i = 0; i < heads.size(); ++i)
      used.push_back(static_cast<uint16_t>(drv().used_elem(static_cast<uint16_t>(from + i)).id));
    std::sort(used.begin(), used.end());
    std::sort(heads.begin(), heads.end());
    EXPECT_EQ(used, heads) << "used elements from index " << from;
    for (unsigned s : slots)
      EXPECT_EQ(ram_.mem().read_obj<uint8_t>(status(s)).value(), VIRTIO_BLK_S_OK) << "slot " << s;
  }
  /// Reads blocks back through the device (8 at a time) and checks their contents.
  void expect_blocks(Vm& vm, const std::vector<unsigned>& blocks) {
    for (size_t base = 0; base < blocks.size(); base += 8) {
      uint16_t want = drv().used_idx();
      size_t n = std::min<size_t>(8, blocks.size() - base);
      for (size_t i = 0; i < n; ++i)
        queue_request(VIRTIO_BLK_T_IN, 8ull * blocks[base + i], static_cast<unsigned>(i));
      want = static_cast<uint16_t>(want + n);
      vm.pci().notify(0);
      ASSERT_TRUE(wait_used_irqfd(vm, want));
      for (size_t i = 0; i < n; ++i) {
        std::vector<uint8_t> got(kReqBytes);
        (void)ram_.mem().read(data(static_cast<unsigned>(i)), got);
        EXPECT_EQ(got, std::vector<uint8_t>(kReqBytes, fill(blocks[base + i])))
            << "block " << blocks[base + i];
      }
    }
  }
};

TEST_P(BlockSnapshotTest, QuiesceCompletesInFlightThenRestoredDeviceContinues) {
  make_image(1 << 20);
  drivers_.clear();
  drivers_.push_back(std::make_unique<FakeVirtqueueDriver>(ram_.mem(), 0x1000, kQueueSize));
  auto a = make_vm();
  ASSERT_TRUE(a);
  uint64_t features = a->dev->device_features() & ~virtio::feature(virtio::VIRTIO_F_EVENT_IDX);
  ASSERT_EQ(a->pci().probe(features, {drv().config()}),
            vp::ACKNOWLEDGE | vp::DRIVER | vp::FEATURES_OK | vp::DRIVER_OK);

  // Eight writes in flight, then quiesce at once: all must be complete when it returns.
  std::vector<uint16_t> heads;
  std::vector<unsigned> slots;
  for (unsigned i = 0; i < 8; ++i) {
    heads.push_back(queue_write(i, i));
    slots.push_back(i);
  }
  a->pci().notify(0);
  a->dev->quiesce();
  // Nothing is in flight once quiesce returns: every request the worker took (the first k, in
  // ring order) is complete. Requests it had not taken yet (its kick still pending, on a loaded
  // machine) stay available in the ring and complete after the restore.
  const uint16_t k = drv().used_idx();
  ASSERT_LE(k, 8);
  EXPECT_EQ(a->dev->queue_positions(), at(k, k));
  expect_completed(0, std::vector<uint16_t>(heads.begin(), heads.begin() + k),
                   std::vector<unsigned>(slots.begin(), slots.begin() + k));

  // A request made available and kicked while quiesced is not taken; the kick stays pending.
  uint16_t pending_head = queue_write(8, 8);
  a->pci().notify(0);
  EXPECT_EQ(a->dev->queue_positions(), at(k, k));

  snap::ByteWriter w;
  a->transport->save_state(w);
  auto bytes = w.take();
  a.reset();  // the old process goes away; the device never took the pending requests
  EXPECT_EQ(drv().used_idx(), k);

  // A fresh process: same disk, same guest memory, state restored before any vCPU runs.
  auto b = make_vm();
  ASSERT_TRUE(b);
  snap::ByteReader r(bytes, "pci section");
  auto restored = b->transport->restore_state(r);
  ASSERT_TRUE(restored) << restored.error().message();
  ASSERT_TRUE(r.expect_end());
  b->root.refresh_bar_mappings();
  EXPECT_TRUE(b->transport->activated());

  // The restored worker re-checks the ring: the requests pending at snapshot time complete.
  ASSERT_TRUE(wait_used_irqfd(*b, 9));
  std::vector<uint16_t> rest(heads.begin() + k, heads.end());
  std::vector<unsigned> rest_slots(slots.begin() + k, slots.end());
  rest.push_back(pending_head);
  rest_slots.push_back(8);
  expect_completed(k, rest, rest_slots);

  // More writes through the restored device: used indices continue from 9.
  heads.clear();
  slots.clear();
  for (unsigned i = 0; i < 8; ++i) {
    heads.push_back(queue_write(9 + i, i));
    slots.push_back(i);
  }
  b->pci().notify(0);
  ASSERT_TRUE(wait_used_irqfd(*b, 17));
  expect_completed(9, heads, slots);
  expect_blocks(*b, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16});
  b->dev->quiesce();
  EXPECT_EQ(b->dev->queue_positions(), at(34, 34));
  b->dev->unquiesce();
  // The restored transport saves the same registers it was restored from (positions aside).
  snap::ByteWriter w2;
  b->dev->quiesce();
  b->transport->save_state(w2);
  EXPECT_EQ(w2.data().size(), bytes.size());
}

TEST_P(BlockSnapshotTest, UnquiesceServesRequestsKickedWhileQuiesced) {
  make_image(1 << 20);
  DiskConfig c = config();
  c.engine = GetParam();
  start(c);
  dev_->quiesce();
  EXPECT_EQ(dev_->queue_positions(), at(0, 0));
  put_header(VIRTIO_BLK_T_IN, 0);
  (void)ram_.mem().write_obj<uint8_t>(kStatusGpa, 0xff);
  arm();
  drv().add_chain({{kHeaderGpa, 16, false}, {kDataGpa, 512, true}, {kStatusGpa, 1, true}});
  kick();
  EXPECT_EQ(dev_->queue_positions(), at(0, 0));
  dev_->unquiesce();
  ASSERT_TRUE(wait_used(1));
  EXPECT_EQ(ram_.mem().read_obj<uint8_t>(kStatusGpa).value(), VIRTIO_BLK_S_OK);
  dev_->quiesce();
  EXPECT_EQ(dev_->queue_positions(), at(1, 1));
  dev_->unquiesce();
  expect_alive();
}

INSTANTIATE_TEST_SUITE_P(Engines, BlockSnapshotTest,
                         ::testing::Values(IoEngineKind::kIoUring, IoEngineKind::kThreads),
                         [](const auto& info) {
                           return info.param == IoEngineKind::kIoUring ? std::string("io_uring")
                                                                       : std::string("threads");
                         });

}  // namespace
}  // namespace tern::testing
