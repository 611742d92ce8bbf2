// VirtioPciTransport snapshot: registers, BARs, MSI-X and activation survive save -> fresh
// transport -> restore; bad input is refused with errors naming the device and field.
#include <gtest/gtest.h>

#include "devices/testing/fake_pci_platform.h"
#include "virtio/transport/testing/virtio_pci_test_driver.h"
#include "virtio/virtio_spec.h"

namespace tern {
namespace {

namespace vp = virtio_pci;
constexpr uint64_t kWindow = 0xC0000000;

class StateFakeDevice final : public VirtioDevice {
 public:
  uint32_t device_type() const override { return 2; }
  std::string_view name() const override { return "fake-blk"; }
  uint64_t device_features() const override {
    return virtio::feature(virtio::VIRTIO_F_VERSION_1) | 2;
  }
  uint16_t num_queues() const override { return 2; }
  uint16_t max_queue_size() const override { return 256; }
  void read_config(uint64_t, std::span<uint8_t> d) override { std::fill(d.begin(), d.end(), 7); }
  void write_config(uint64_t, std::span<const uint8_t>) override {}
  Result<void> activate(const GuestMemory&, uint64_t features, std::vector<VirtqueueConfig> q,
                        std::vector<UniqueFd> k, std::shared_ptr<VirtioInterrupt>) override {
    acked = features;
    queues = std::move(q);
    kicks = std::move(k);
    ++activations;
    return {};
  }
  void reset() override { kicks.clear(); }
  std::vector<QueuePosition> queue_positions() const override { return positions; }

  uint64_t acked = 0;
  std::vector<VirtqueueConfig> queues;
  std::vector<UniqueFd> kicks;
  std::vector<QueuePosition> positions{{7, 5}, {0, 0}};
  int activations = 0;
};

struct Vm {
  Vm() {
    dev = std::make_shared<StateFakeDevice>();
    VirtioPciPlacement p{.virtio_bar_gpa = static_cast<uint32_t>(kWindow),
                         .msix_bar_gpa = static_cast<uint32_t>(kWindow + vp::kVirtioBarSize),
                         .intx_irq = 10};
    transport = VirtioPciTransport::create(dev, mem, platform, p).value();
    slot = root.add(transport).value();
  }
  testing::VirtioPciTestDriver driver() { return {root, slot}; }
  std::vector<uint8_t> save() {
    snap::ByteWriter w;
    root.save_state(w);
    transport->save_state(w);
    return w.take();
  }
  Result<void> restore(std::span<const uint8_t> b) {
    snap::ByteReader r(b, "pci test section");
    TRY(root.restore_state(r));
    TRY(transport->restore_state(r));
    root.refresh_bar_mappings();
    return r.expect_end();
  }

  GuestMemory mem = GuestMemory::wrap({});
  FakePciPlatform platform;
  PciRoot root{kWindow, 0x10000000};
  std::shared_ptr<StateFakeDevice> dev;
  std::shared_ptr<VirtioPciTransport> transport;
  uint8_t slot = 0;
};

constexpr uint64_t kMovedBar0 = kWindow + 0x100000;

/// A VM driven to DRIVER_OK with queue 0 enabled, BAR0 moved, config space bits and ISR set.
void drive(Vm& vm) {
  auto d = vm.driver();
  VirtqueueConfig q0{.size = 128, .desc_gpa = 0x10000, .avail_gpa = 0x11000,
                     .used_gpa = 0x12000, .enabled = true};
  VirtqueueConfig q1{.size = 64, .desc_gpa = 0x20000, .avail_gpa = 0, .used_gpa = 0,
                     .enabled = false};
  ASSERT_EQ(d.probe(virtio::feature(virtio::VIRTIO_F_VERSION_1) | 2, {q0, q1}),
            vp::ACKNOWLEDGE | vp::DRIVER | vp::FEATURES_OK | vp::DRIVER_OK);
  // The guest relocates BAR0 (memory decode off while it does, as Linux does).
  d.set_cfg(pci::kCommand, pci::kCommandBusMaster, 2);
  d.set_cfg(pci::kBar0, static_cast<uint32_t>(kMovedBar0));
  d.set_cfg(pci::kCommand, pci::kCommandMemory | pci::kCommandBusMaster, 2);
  d.set_cfg(pci::kInterruptLine, 11, 1);
  d.wr(d.common(vp::kDeviceFeatureSelect), 1, 4);
  d.wr(d.common(vp::kQueueSelect), 1, 2);
  vm.transport->interrupt().signal_config_change();  // ISR config bit + MSI-X vector 0
  // CONFIG_ADDRESS left pointing at the function's BAR0.
  uint32_t addr = pci::kConfigAddressEnable | (uint32_t{vm.slot} << 11) | pci::kBar0;
  vm.root.config_port()->write(0, std::span<const uint8_t>(reinterpret_cast<uint8_t*>(&addr), 4));
}

TEST(VirtioPciState, RoundTripRestoresRegistersBarsMsixAndActivation) {
  Vm a;
  drive(a);
  auto bytes = a.save();

  Vm b;
  auto r = b.restore(bytes);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(b.save(), bytes);

  auto da = a.driver(), db = b.driver();
  for (uint32_t off = 0; off < pci::kConfigSpaceSize; off += 4)
    EXPECT_EQ(da.cfg(off), db.cfg(off)) << "config offset " << off;
  EXPECT_EQ(db.bar(0), kMovedBar0);
  EXPECT_EQ(da.common_snapshot(2), db.common_snapshot(2));
  EXPECT_EQ(db.rd(db.bar(0) + vp::kIsrOffset, 1), vp::kIsrConfig);  // ISR survived
  EXPECT_EQ(da.rd(da.bar(1) + vp::kMsixTableOffset + 16 + 8, 4), 0x41u);
  EXPECT_EQ(db.rd(db.bar(1) + vp::kMsixTableOffset + 16 + 8, 4), 0x41u);
  uint8_t cfg_addr[4], cfg_addr_a[4];
  b.root.config_port()->read(0, cfg_addr);
  a.root.config_port()->read(0, cfg_addr_a);
  EXPECT_EQ(std::memcmp(cfg_addr, cfg_addr_a, 4), 0);

  // ioeventfds at the restored BAR0, MSI routes re-programmed, device activated mid-stream.
  ASSERT_EQ(b.platform.ioeventfds.size(), 2u);
  EXPECT_TRUE(b.platform.ioeventfds.count(kMovedBar0 + vp::kNotifyOffset));
  EXPECT_TRUE(b.platform.ioeventfds.count(kMovedBar0 + vp::kNotifyOffset + 4));
  ASSERT_EQ(b.platform.routes.size(), a.platform.routes.size());
  for (auto& [gsi, route] : a.platform.routes) {
    EXPECT_EQ(b.platform.routes[gsi].address, route.address);
    EXPECT_EQ(b.platform.routes[gsi].data, route.data);
  }
  ASSERT_EQ(b.dev->activations, 1);
  EXPECT_EQ(b.dev->acked, a.dev->acked);
  ASSERT_EQ(b.dev->queues.size(), 2u);
  EXPECT_EQ(b.dev->queues[0].size, 128);
  EXPECT_EQ(b.dev->queues[0].used_gpa, 0x12000u);
  EXPECT_EQ(b.dev->queues[0].position, (QueuePosition{7, 5}));
  // Marked restored (the device owes each enabled queue a notification); a DRIVER_OK is not.
  EXPECT_TRUE(b.dev->queues[0].restored);
  EXPECT_FALSE(a.dev->queues[0].restored);
  EXPECT_FALSE(b.dev->queues[1].enabled);
  EXPECT_EQ(b.dev->queues[1].position, QueuePosition{});

  // Notifications reach the restored device's kick eventfd.
  db.notify(0);
  EXPECT_TRUE(testing::wait_eventfd(b.dev->kicks[0].get()));
}

TEST(VirtioPciState, TruncatedInputFailsAtEveryLength) {
  Vm a;
  drive(a);
  auto bytes = a.save();
  for (size_t n = 0; n < bytes.size(); ++n) {
    Vm b;
    EXPECT_FALSE(b.restore(std::span<const uint8_t>(bytes).first(n))) << n;
    EXPECT_EQ(b.dev->activations, 0) << n;
  }
}

TEST(VirtioPciState, InvalidFieldsAreRefusedNamingDeviceAndField) {
  Vm a;
  drive(a);
  auto bytes = a.save();
  const size_t root_len = 4 + 4 + 256;
  const size_t msix = 2 + 3 * 17, irq = 1 + 1 + 1 + 2 + 2 + 2 * 2;
  const size_t regs = root_len + 4 + 256 + msix + irq;  // device_feature_select
  const size_t status = regs + 4 + 4 + 8;
  const size_t queue0 = status + 1 + 1 + 2 + 1 + 2;
  auto expect_error = [&](size_t at, uint8_t value, const std::string& what) {
    auto bad = bytes;
    bad[at] = value;
    Vm b;
    auto r = b.restore(bad);
    ASSERT_FALSE(r) << what;
    EXPECT_NE(r.error().message().find(what), std::string::npos) << r.error().message();
    EXPECT_EQ(b.dev->activations, 0);
  };
  expect_error(root_len + 4 + pci::kVendorId, 0x00, "fake-blk: pci config space");
  expect_error(root_len + 4 + 256 + 2 + 12, 0x02, "fake-blk: msix vector 0");
  expect_error(root_len + 4 + 256 + msix + 3, 0x09, "fake-blk: config_msix_vector");
  expect_error(status, vp::DEVICE_NEEDS_RESET | vp::DRIVER, "fake-blk: device_status");
  expect_error(queue0, 100, "fake-blk: queue 0 size");
  expect_error(queue0 + 1, 0x01, "fake-blk: queue 0 size");  // 257 > 256
  expect_error(queue0 + 2 + 1 + 24 + 1, 0x02, "fake-blk: queue 0 position");  // avail 0x207
  expect_error(4 + 4 + 0, 0x00, "pci-root: host bridge config space");
}

TEST(VirtioPciState, RestoreIntoAUsedTransportIsRefused) {
  Vm a;
  drive(a);
  auto bytes = a.save();
  Vm b;
  drive(b);
  EXPECT_FALSE(b.restore(bytes));
}

}  // namespace
}  // namespace tern
