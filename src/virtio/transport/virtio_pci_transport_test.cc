#include "virtio/transport/virtio_pci_transport.h"

#include <gtest/gtest.h>
#include <poll.h>

#include <cstring>
#include <map>

#include "devices/pci/pci_registers.h"
#include "devices/pci/pci_root.h"
#include "devices/testing/fake_pci_platform.h"
#include "virtio/transport/virtio_pci_registers.h"
#include "virtio/virtio_spec.h"

namespace tern {
namespace {

namespace vp = virtio_pci;

constexpr uint64_t kWindow = 0xC0000000;
constexpr uint64_t kFeatureBlkSizeMax = 1ull << 1;

class FakeDevice final : public VirtioDevice {
 public:
  uint32_t device_type() const override { return 2; }
  std::string_view name() const override { return "fake-blk"; }
  uint64_t device_features() const override {
    return virtio::feature(virtio::VIRTIO_F_VERSION_1) | kFeatureBlkSizeMax;
  }
  uint16_t num_queues() const override { return 2; }
  uint16_t max_queue_size() const override { return 256; }
  void read_config(uint64_t offset, std::span<uint8_t> data) override {
    for (size_t i = 0; i < data.size(); ++i)
      data[i] = offset + i < sizeof(config) ? config[offset + i] : 0;
  }
  void write_config(uint64_t offset, std::span<const uint8_t> data) override {
    for (size_t i = 0; i < data.size() && offset + i < sizeof(config); ++i)
      config[offset + i] = data[i];
  }
  Result<void> activate(const GuestMemory&, uint64_t features, std::vector<VirtqueueConfig> q,
                        std::vector<UniqueFd> k, std::shared_ptr<VirtioInterrupt> irq) override {
    if (fail_activate) return fail("activate", "test failure");
    acked = features;
    queues = std::move(q);
    kicks = std::move(k);
    interrupt = std::move(irq);
    ++activations;
    return {};
  }
  void reset() override {
    ++resets;
    kicks.clear();
    interrupt.reset();
  }

  uint8_t config[8] = {0x00, 0x10, 0, 0, 0, 0, 0, 0};  // capacity 4096 sectors
  bool fail_activate = false;
  uint64_t acked = 0;
  std::vector<VirtqueueConfig> queues;
  std::vector<UniqueFd> kicks;
  std::shared_ptr<VirtioInterrupt> interrupt;
  int activations = 0, resets = 0;
};

bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1;
}

uint64_t drain(int fd) {
  uint64_t v = 0;
  if (::read(fd, &v, sizeof v) != sizeof v) return 0;
  return v;
}

class VirtioPciTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dev = std::make_shared<FakeDevice>();
    VirtioPciPlacement p{.virtio_bar_gpa = static_cast<uint32_t>(kWindow),
                         .msix_bar_gpa = static_cast<uint32_t>(kWindow + vp::kVirtioBarSize),
                         .intx_irq = 10};
    auto t = VirtioPciTransport::create(dev, mem, platform, p);
    ASSERT_TRUE(t) << t.error().message();
    transport = *t;
    auto s = root.add(transport);
    ASSERT_TRUE(s);
    slot = *s;
  }

  uint32_t cfg(uint32_t off, size_t width = 4) {
    uint8_t b[4] = {};
    root.config_read(slot, 0, off, std::span<uint8_t>(b, width));
    uint32_t v = 0;
    std::memcpy(&v, b, width);
    return v;
  }
  void set_cfg(uint32_t off, uint32_t v, size_t width = 4) {
    root.config_write(slot, 0, off,
                      std::span<const uint8_t>(reinterpret_cast<uint8_t*>(&v), width));
  }
  uint64_t rd(uint64_t gpa, size_t width) {
    uint8_t b[8] = {};
    root.mmio_window()->read(gpa - kWindow, std::span<uint8_t>(b, width));
    uint64_t v = 0;
    std::memcpy(&v, b, width);
    return v;
  }
  void wr(uint64_t gpa, uint64_t v, size_t width) {
    root.mmio_window()->write(gpa - kWindow,
                              std::span<const uint8_t>(reinterpret_cast<uint8_t*>(&v), width));
  }
  uint64_t bar0() { return cfg(pci::kBar0) & ~0xFu; }
  uint64_t common(uint32_t off) { return bar0() + vp::kCommonCfgOffset + off; }

  /// Virtio capabilities by cfg_type, as Linux's virtio_pci_find_capability walks them.
  std::map<uint8_t, uint8_t> find_caps() {
    std::map<uint8_t, uint8_t> caps;
    uint8_t p = static_cast<uint8_t>(cfg(pci::kCapabilitiesPointer, 1));
    for (int guard = 0; p && guard < 48; ++guard) {
      uint8_t id = static_cast<uint8_t>(cfg(p, 1));
      if (id == pci::kCapVendorSpecific) caps[static_cast<uint8_t>(cfg(p + 3, 1))] = p;
      if (id == pci::kCapMsix) caps[0xFF] = p;
      p = static_cast<uint8_t>(cfg(p + 1, 1));
    }
    return caps;
  }

  /// The Linux virtio_pci_modern + virtio_blk probe up to DRIVER_OK, MSI-X on.
  void drive_to_driver_ok() {
    set_cfg(pci::kCommand, pci::kCommandMemory | pci::kCommandBusMaster, 2);
    uint8_t msix = find_caps()[0xFF];
    set_cfg(msix + 2, pci::kMsixControlEnable, 2);
    wr(common(vp::kDeviceStatus), 0, 1);
    wr(common(vp::kDeviceStatus), vp::ACKNOWLEDGE, 1);
    wr(common(vp::kDeviceStatus), vp::ACKNOWLEDGE | vp::DRIVER, 1);
    wr(common(vp::kDeviceFeatureSelect), 1, 4);
    ASSERT_EQ(rd(common(vp::kDeviceFeature), 4), 1u);  // VERSION_1 is bit 32
    wr(common(vp::kDriverFeatureSelect), 0, 4);
    wr(common(vp::kDriverFeature), kFeatureBlkSizeMax, 4);
    wr(common(vp::kDriverFeatureSelect), 1, 4);
    wr(common(vp::kDriverFeature), 1, 4);
    wr(common(vp::kDeviceStatus), vp::ACKNOWLEDGE | vp::DRIVER | vp::FEATURES_OK, 1);
    ASSERT_EQ(rd(common(vp::kDeviceStatus), 1), vp::ACKNOWLEDGE | vp::DRIVER | vp::FEATURES_OK);
    wr(common(vp::kConfigMsixVector), 0, 2);
    for (uint16_t q = 0; q < 2; ++q) {
      wr(common(vp::kQueueSelect), q, 2);
      ASSERT_EQ(rd(common(vp::kQueueSize), 2), 256u);
      wr(common(vp::kQueueSize), 128, 2);
      wr(common(vp::kQueueMsixVector), q + 1, 2);
      ASSERT_EQ(rd(common(vp::kQueueMsixVector), 2), q + 1u);
      uint64_t base = 0x100000 + q * 0x10000;
      wr(common(vp::kQueueDesc), base, 4);  // 64-bit fields as two 32-bit halves, like Linux
      wr(common(vp::kQueueDesc) + 4, 0, 4);
      wr(common(vp::kQueueDriver), base + 0x1000, 8);
      wr(common(vp::kQueueDevice), base + 0x2000, 8);
      wr(common(vp::kQueueEnable), 1, 2);
    }
    wr(common(vp::kDeviceStatus), vp::ACKNOWLEDGE | vp::DRIVER | vp::FEATURES_OK | vp::DRIVER_OK,
       1);
  }

  GuestMemory mem = GuestMemory::wrap({});
  FakePciPlatform platform;
  PciRoot root{kWindow, 0x10000000};
  std::shared_ptr<FakeDevice> dev;
  std::shared_ptr<VirtioPciTransport> transport;
  uint8_t slot = 0;
};

TEST_F(VirtioPciTest, IdentityAndCapabilitiesAsLinuxProbesThem) {
  EXPECT_EQ(cfg(pci::kVendorId, 2), 0x1AF4u);
  EXPECT_EQ(cfg(pci::kDeviceId, 2), 0x1042u);  // 0x1040 + virtio-blk
  EXPECT_EQ(cfg(pci::kRevisionId, 1), 1u);
  EXPECT_EQ(cfg(pci::kSubsystemId, 2), 0x40u);
  EXPECT_EQ(cfg(pci::kInterruptPin, 1), 1u);
  EXPECT_EQ(cfg(pci::kInterruptLine, 1), 10u);
  EXPECT_TRUE(cfg(pci::kStatus, 2) & pci::kStatusCapabilities);
  auto caps = find_caps();
  ASSERT_EQ(caps.size(), 6u);  // common, notify, ISR, device, PCI cfg, MSI-X
  auto cap_field = [&](uint8_t type, uint32_t off) { return cfg(caps[type] + off); };
  EXPECT_EQ(cap_field(vp::VIRTIO_PCI_CAP_COMMON_CFG, vp::kCapOffset), vp::kCommonCfgOffset);
  EXPECT_EQ(cap_field(vp::VIRTIO_PCI_CAP_COMMON_CFG, vp::kCapLength), vp::kCommonCfgSize);
  EXPECT_EQ(cap_field(vp::VIRTIO_PCI_CAP_NOTIFY_CFG, vp::kCapOffset), vp::kNotifyOffset);
  EXPECT_EQ(cap_field(vp::VIRTIO_PCI_CAP_NOTIFY_CFG, vp::kCapLength), 8u);
  EXPECT_EQ(cap_field(vp::VIRTIO_PCI_CAP_NOTIFY_CFG, vp::kCapSize), vp::kNotifyOffMultiplier);
  EXPECT_EQ(cfg(caps[vp::VIRTIO_PCI_CAP_NOTIFY_CFG] + vp::kCapLen, 1), vp::kNotifyCapSize);
  EXPECT_EQ(cap_field(vp::VIRTIO_PCI_CAP_ISR_CFG, vp::kCapOffset), vp::kIsrOffset);
  EXPECT_EQ(cap_field(vp::VIRTIO_PCI_CAP_DEVICE_CFG, vp::kCapOffset), vp::kDeviceCfgOffset);
  EXPECT_EQ(cfg(caps[vp::VIRTIO_PCI_CAP_DEVICE_CFG] + vp::kCapBar, 1), 0u);
  // MSI-X: 3 vectors (2 queues + config), table at BAR1+0, PBA at BAR1+0x800.
  EXPECT_EQ(cfg(caps[0xFF] + 2, 2), 2u);
  EXPECT_EQ(cfg(caps[0xFF] + 4), 1u);
  EXPECT_EQ(cfg(caps[0xFF] + 8), 0x801u);
}

TEST_F(VirtioPciTest, BarSizingAndRelocationMoveTheMmioWindowAndIoeventfds) {
  EXPECT_EQ(bar0(), kWindow);
  set_cfg(pci::kBar0, 0xFFFFFFFF);
  EXPECT_EQ(cfg(pci::kBar0), 0xFFFFC000u);  // 16 KiB, 32-bit, non-prefetchable
  set_cfg(pci::kBar0 + 4, 0xFFFFFFFF);
  EXPECT_EQ(cfg(pci::kBar0 + 4), 0xFFFFF000u);  // 4 KiB
  EXPECT_EQ(cfg(pci::kBar0 + 8), 0u);           // BAR2 not implemented
  set_cfg(pci::kBar0, kWindow + 0x100000);
  set_cfg(pci::kBar0 + 4, kWindow + 0x104000);
  EXPECT_TRUE(platform.ioeventfds.empty());  // memory decoding still off
  EXPECT_EQ(rd(kWindow + 0x100000 + vp::kNumQueues, 2), 0xFFFFu);
  set_cfg(pci::kCommand, pci::kCommandMemory, 2);
  EXPECT_EQ(rd(kWindow + 0x100000 + vp::kNumQueues, 2), 2u);
  EXPECT_EQ(rd(kWindow + vp::kNumQueues, 2), 0xFFFFu);  // old place: nothing
  ASSERT_EQ(platform.ioeventfds.size(), 2u);
  EXPECT_EQ(platform.ioeventfds.count(kWindow + 0x100000 + vp::kNotifyOffset), 1u);
  EXPECT_EQ(platform.ioeventfds.at(kWindow + 0x100000 + vp::kNotifyOffset + 4).len, 2u);
  set_cfg(pci::kBar0, kWindow + 0x200000);  // moved while decoding: deassign + assign
  EXPECT_EQ(platform.ioeventfds.count(kWindow + 0x200000 + vp::kNotifyOffset), 1u);
  EXPECT_EQ(platform.ioeventfds.size(), 2u);
  set_cfg(pci::kCommand, 0, 2);
  EXPECT_TRUE(platform.ioeventfds.empty());
  EXPECT_GE(root.stray_mmio(), 2u);
}

TEST_F(VirtioPciTest, NegotiationQueueSetupAndActivation) {
  drive_to_driver_ok();
  ASSERT_EQ(dev->activations, 1);
  EXPECT_TRUE(transport->activated());
  EXPECT_EQ(dev->acked, virtio::feature(virtio::VIRTIO_F_VERSION_1) | kFeatureBlkSizeMax);
  ASSERT_EQ(dev->queues.size(), 2u);
  EXPECT_EQ(dev->queues[1].size, 128);
  EXPECT_EQ(dev->queues[1].desc_gpa, 0x110000u);
  EXPECT_EQ(dev->queues[1].avail_gpa, 0x111000u);
  EXPECT_EQ(dev->queues[1].used_gpa, 0x112000u);
  EXPECT_TRUE(dev->queues[1].enabled);
  ASSERT_EQ(dev->kicks.size(), 2u);
  // The device's kick fd is the ioeventfd's eventfd: a kick through userspace (4-byte write that
  // KVM's 2-byte ioeventfd would not match) reaches it too.
  EXPECT_EQ(platform.ioeventfds.at(bar0() + vp::kNotifyOffset + 4).len, 2u);
  wr(bar0() + vp::kNotifyOffset + 4, 1, 4);
  EXPECT_TRUE(readable(dev->kicks[1].get()));
  EXPECT_FALSE(readable(dev->kicks[0].get()));
  // Device config passes through.
  EXPECT_EQ(rd(bar0() + vp::kDeviceCfgOffset, 8), 0x1000u);
  EXPECT_EQ(rd(bar0() + vp::kDeviceCfgOffset + 0x100, 4), 0u);
  // Queue writes after DRIVER_OK are refused.
  uint64_t errs = transport->protocol_errors();
  wr(common(vp::kQueueSize), 64, 2);
  EXPECT_EQ(rd(common(vp::kQueueSize), 2), 128u);
  EXPECT_EQ(transport->protocol_errors(), errs + 1);
  // Reset stops the device and returns the registers to their initial values.
  wr(common(vp::kDeviceStatus), 0, 1);
  EXPECT_EQ(dev->resets, 1);
  EXPECT_EQ(rd(common(vp::kDeviceStatus), 1), 0u);
  wr(common(vp::kQueueSelect), 1, 2);
  EXPECT_EQ(rd(common(vp::kQueueSize), 2), 256u);
  EXPECT_EQ(rd(common(vp::kQueueEnable), 2), 0u);
  EXPECT_EQ(rd(common(vp::kQueueMsixVector), 2), vp::VIRTIO_MSI_NO_VECTOR);
}

TEST_F(VirtioPciTest, BadDriverValuesAreIgnoredAndCounted) {
  set_cfg(pci::kCommand, pci::kCommandMemory, 2);
  wr(common(vp::kDeviceStatus), vp::ACKNOWLEDGE, 1);
  // Feature write before DRIVER.
  wr(common(vp::kDriverFeature), 1, 4);
  EXPECT_EQ(transport->driver_features(), 0u);
  EXPECT_EQ(transport->protocol_errors(), 1u);
  wr(common(vp::kDeviceStatus), vp::ACKNOWLEDGE | vp::DRIVER, 1);
  // Queue size: not a power of two, above max, zero.
  wr(common(vp::kQueueSize), 3, 2);
  wr(common(vp::kQueueSize), 512, 2);
  wr(common(vp::kQueueSize), 0, 2);
  EXPECT_EQ(rd(common(vp::kQueueSize), 2), 256u);
  EXPECT_EQ(transport->protocol_errors(), 4u);
  // Odd width / unaligned / read-only.
  wr(common(vp::kQueueSize), 0x40, 1);
  wr(common(vp::kDeviceStatus) + 1, 0xFF, 4);
  wr(common(vp::kNumQueues), 7, 2);
  wr(bar0() + 0x1800, 1, 4);  // unimplemented BAR0 offset
  EXPECT_EQ(rd(common(vp::kNumQueues), 2), 2u);
  EXPECT_EQ(rd(common(vp::kQueueSize), 2), 256u);
  EXPECT_EQ(rd(bar0() + 0x1800, 4), 0u);
  EXPECT_EQ(rd(bar0() + vp::kCommonCfgSize, 8), 0u);
  EXPECT_EQ(transport->protocol_errors(), 8u);
  // Misaligned descriptor table: queue stays disabled.
  wr(common(vp::kQueueDesc), 0x1008, 8);
  wr(common(vp::kQueueEnable), 1, 2);
  EXPECT_EQ(rd(common(vp::kQueueEnable), 2), 0u);
  // Queue out of range reads size 0 and ignores writes.
  wr(common(vp::kQueueSelect), 9, 2);
  EXPECT_EQ(rd(common(vp::kQueueSize), 2), 0u);
  wr(common(vp::kQueueSize), 16, 2);
  // FEATURES_OK with a feature not offered stays clear (§3.1.1).
  wr(common(vp::kDriverFeatureSelect), 0, 4);
  wr(common(vp::kDriverFeature), 1u << 5, 4);
  wr(common(vp::kDeviceStatus), vp::ACKNOWLEDGE | vp::DRIVER | vp::FEATURES_OK, 1);
  EXPECT_EQ(rd(common(vp::kDeviceStatus), 1), vp::ACKNOWLEDGE | vp::DRIVER);
  // Clearing a status bit is refused.
  wr(common(vp::kDeviceStatus), vp::DRIVER, 1);
  EXPECT_EQ(rd(common(vp::kDeviceStatus), 1), vp::ACKNOWLEDGE | vp::DRIVER);
  // DRIVER_OK without FEATURES_OK: no activation, NEEDS_RESET.
  wr(common(vp::kDeviceStatus), vp::ACKNOWLEDGE | vp::DRIVER | vp::DRIVER_OK, 1);
  EXPECT_EQ(dev->activations, 0);
  EXPECT_TRUE(rd(common(vp::kDeviceStatus), 1) & vp::DEVICE_NEEDS_RESET);
  wr(common(vp::kDeviceStatus), 0, 1);
  EXPECT_EQ(rd(common(vp::kDeviceStatus), 1), 0u);
}

TEST_F(VirtioPciTest, MsixVectorsFireThroughIrqfdsAndPendWhileMasked) {
  drive_to_driver_ok();
  uint64_t bar1 = cfg(pci::kBar0 + 4) & ~0xFu;
  // Vector 1 (queue 0): address/data, then unmask — the route is installed on unmask.
  wr(bar1 + 16 + 0, 0xFEE00000, 4);
  wr(bar1 + 16 + 4, 0, 4);
  wr(bar1 + 16 + 8, 0x4041, 4);
  EXPECT_EQ(platform.routes.count(transport->interrupt().msix().gsi(1)), 0u);
  wr(bar1 + 16 + 12, 0, 4);
  ASSERT_EQ(platform.routes.count(transport->interrupt().msix().gsi(1)), 1u);
  EXPECT_EQ(platform.routes[transport->interrupt().msix().gsi(1)].data, 0x4041u);
  EXPECT_EQ(rd(bar1 + 16 + 8, 4), 0x4041u);
  int fd1 = transport->interrupt().msix().irqfd(1).get();
  dev->interrupt->signal_used_queue(0);
  EXPECT_EQ(drain(fd1), 1u);
  // Queue 1 uses vector 2, still masked: pending bit, then delivery on unmask.
  int fd2 = transport->interrupt().msix().irqfd(2).get();
  dev->interrupt->signal_used_queue(1);
  EXPECT_FALSE(readable(fd2));
  EXPECT_EQ(rd(bar1 + vp::kMsixPbaOffset, 8), 0b100u);
  wr(bar1 + 32 + 12, 0, 4);
  EXPECT_EQ(drain(fd2), 1u);
  EXPECT_EQ(rd(bar1 + vp::kMsixPbaOffset, 8), 0u);
  // No INTx while MSI-X is on, and ISR stays 0 for queue interrupts.
  EXPECT_TRUE(platform.level_changes.empty());
  EXPECT_EQ(rd(bar0() + vp::kIsrOffset, 1), 0u);
  // NEEDS_RESET from the device: status bit + config vector (0, masked -> pending) + ISR bit 1.
  dev->interrupt->set_needs_reset();
  EXPECT_TRUE(rd(common(vp::kDeviceStatus), 1) & vp::DEVICE_NEEDS_RESET);
  EXPECT_TRUE(transport->interrupt().msix().pending(0));
  EXPECT_EQ(rd(bar0() + vp::kIsrOffset, 1), vp::kIsrConfig);
  // Reported again (a vhost vring error at every packet): no further notification.
  const uint64_t raised = transport->interrupt().config_interrupts();
  for (int i = 0; i < 5; ++i) dev->interrupt->set_needs_reset();
  EXPECT_EQ(transport->interrupt().config_interrupts(), raised);
}

TEST_F(VirtioPciTest, IntxFallbackRaisesTheLineUntilIsrIsRead) {
  set_cfg(pci::kCommand, pci::kCommandMemory, 2);
  auto irq = std::shared_ptr<VirtioInterrupt>(transport, &transport->interrupt());
  irq->signal_used_queue(0);
  EXPECT_TRUE(platform.levels[10]);
  EXPECT_EQ(rd(bar0() + vp::kIsrOffset, 1), vp::kIsrQueue);
  EXPECT_FALSE(platform.levels[10]);
  EXPECT_EQ(rd(bar0() + vp::kIsrOffset, 1), 0u);
  irq->signal_config_change();
  EXPECT_TRUE(platform.levels[10]);
  set_cfg(pci::kCommand, pci::kCommandMemory | pci::kCommandIntxDisable, 2);
  EXPECT_FALSE(platform.levels[10]);
  EXPECT_EQ(rd(bar0() + vp::kIsrOffset, 1), vp::kIsrConfig);
}

TEST_F(VirtioPciTest, ActivationFailureSetsNeedsReset) {
  dev->fail_activate = true;
  drive_to_driver_ok();
  EXPECT_FALSE(transport->activated());
  EXPECT_TRUE(transport->device_status() & vp::DEVICE_NEEDS_RESET);
  EXPECT_EQ(dev->resets, 1);
}

TEST_F(VirtioPciTest, PciCfgCapabilityWindowReachesBar0) {
  uint8_t c = find_caps()[vp::VIRTIO_PCI_CAP_PCI_CFG];
  set_cfg(c + vp::kCapBar, 0, 1);
  set_cfg(c + vp::kCapOffset, vp::kNumQueues);
  set_cfg(c + vp::kCapLength, 2);
  EXPECT_EQ(cfg(c + vp::kPciCfgData, 4), 2u);
}

TEST_F(VirtioPciTest, PciCfgWindowNeverSetUpReadsZeroWithoutAProtocolError) {
  // A dump of the configuration space (lspci -xxx) reads pci_cfg_data with cap.length still 0.
  uint8_t c = find_caps()[vp::VIRTIO_PCI_CAP_PCI_CFG];
  EXPECT_EQ(cfg(c + vp::kPciCfgData, 4), 0u);
  EXPECT_EQ(transport->protocol_errors(), 0u);
  // A write through it is still a driver error.
  set_cfg(c + vp::kPciCfgData, 1);
  EXPECT_EQ(transport->protocol_errors(), 1u);
}

}  // namespace
}  // namespace tern
