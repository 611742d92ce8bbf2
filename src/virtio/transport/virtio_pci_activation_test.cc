// DRIVER_OK activation and status-0 reset through a DeviceActivator: with a control thread
// attached they run on it while the writing vCPU waits; the guest sees DRIVER_OK (or
// DEVICE_NEEDS_RESET) as soon as its write returns.
#include <gtest/gtest.h>

#include <thread>

#include "devices/device_activator.h"
#include "devices/pci/pci_root.h"
#include "devices/testing/fake_control_thread.h"
#include "devices/testing/fake_pci_platform.h"
#include "virtio/transport/testing/virtio_pci_test_driver.h"
#include "virtio/transport/virtio_pci_registers.h"
#include "virtio/transport/virtio_pci_transport.h"
#include "virtio/virtio_spec.h"

namespace tern {
namespace {

namespace vp = virtio_pci;

/// Records the thread each activate()/reset() ran on.
class ThreadRecordingDevice final : public VirtioDevice {
 public:
  uint32_t device_type() const override { return 4; }  // entropy
  std::string_view name() const override { return "recording-rng"; }
  uint64_t device_features() const override { return virtio::feature(virtio::VIRTIO_F_VERSION_1); }
  uint16_t num_queues() const override { return 1; }
  uint16_t max_queue_size() const override { return 64; }
  void read_config(uint64_t, std::span<uint8_t> data) override {
    std::fill(data.begin(), data.end(), 0);
  }
  void write_config(uint64_t, std::span<const uint8_t>) override {}
  Result<void> activate(const GuestMemory&, uint64_t, std::vector<VirtqueueConfig>,
                        std::vector<UniqueFd>, std::shared_ptr<VirtioInterrupt>) override {
    activated_on = std::this_thread::get_id();
    ++activations;
    if (fail) return fail_now();
    return {};
  }
  void reset() override {
    reset_on = std::this_thread::get_id();
    ++resets;
  }
  static Result<void> fail_now() { return tern::fail("activate", "test failure"); }

  bool fail = false;
  std::thread::id activated_on, reset_on;
  int activations = 0, resets = 0;
};

class VirtioPciActivationTest : public ::testing::Test {
 protected:
  static constexpr uint64_t kWindow = 0xC0000000;
  void SetUp() override {
    dev = std::make_shared<ThreadRecordingDevice>();
    transport = VirtioPciTransport::create(dev, mem, platform, &activator).value();
    PciPlacement p = root.allocate_bars(transport->bars()).value();
    p.intx_irq = 10;
    ASSERT_TRUE(transport->place(p));
    slot = root.add(transport).value();
  }
  /// The guest's probe up to DRIVER_OK, on a vCPU thread of its own; returns the status read.
  uint8_t probe_on_vcpu() {
    uint8_t status = 0;
    std::thread vcpu([&] {
      vcpu_id = std::this_thread::get_id();
      testing::VirtioPciTestDriver d(root, slot);
      status = d.probe(virtio::feature(virtio::VIRTIO_F_VERSION_1),
                       {{64, 0x10000, 0x20000, 0x30000, true, {}}});
    });
    vcpu.join();
    return status;
  }
  void reset_on_vcpu() {
    std::thread vcpu([&] {
      testing::VirtioPciTestDriver d(root, slot);
      d.wr(d.common(vp::kDeviceStatus), 0, 1);
    });
    vcpu.join();
  }

  FakePciPlatform platform;
  GuestMemory mem = GuestMemory::wrap({});
  DeviceActivator activator;
  PciRoot root{kWindow, 0x10000000};
  std::shared_ptr<ThreadRecordingDevice> dev;
  std::shared_ptr<VirtioPciTransport> transport;
  uint8_t slot = 0;
  std::thread::id vcpu_id;
};

TEST_F(VirtioPciActivationTest, ActivationAndResetRunOnTheControlThread) {
  testing::FakeControlThread ctl(activator);
  uint8_t status = probe_on_vcpu();
  EXPECT_EQ(status, vp::ACKNOWLEDGE | vp::DRIVER | vp::FEATURES_OK | vp::DRIVER_OK);
  EXPECT_EQ(dev->activations, 1);
  EXPECT_EQ(dev->activated_on, ctl.id());
  EXPECT_TRUE(transport->activated());
  reset_on_vcpu();
  EXPECT_EQ(dev->reset_on, ctl.id());
  EXPECT_FALSE(transport->activated());
  EXPECT_EQ(transport->device_status(), 0);
  EXPECT_EQ(activator.queued_runs(), 2u);
}

TEST_F(VirtioPciActivationTest, FailedActivationReadsNeedsResetWhenTheWriteReturns) {
  testing::FakeControlThread ctl(activator);
  dev->fail = true;
  uint8_t status = probe_on_vcpu();
  EXPECT_TRUE(status & vp::DEVICE_NEEDS_RESET);
  EXPECT_EQ(dev->activated_on, ctl.id());
  EXPECT_EQ(dev->reset_on, ctl.id());  // the failed activation is undone on the same thread
  EXPECT_FALSE(transport->activated());
}

TEST_F(VirtioPciActivationTest, WithoutAControlThreadTheVcpuActivates) {
  uint8_t status = probe_on_vcpu();
  EXPECT_TRUE(status & vp::DRIVER_OK);
  EXPECT_EQ(dev->activated_on, vcpu_id);
  EXPECT_EQ(activator.inline_runs(), 1u);
}

TEST_F(VirtioPciActivationTest, CountersAppendTheTransportsOwn) {
  probe_on_vcpu();
  DeviceCounters c = transport->counters();
  EXPECT_EQ(c.name, "recording-rng");
  EXPECT_EQ(c.kind, "virtio-rng");
  ASSERT_EQ(c.counters.size(), 3u);
  EXPECT_EQ(c.counters[0].first, "protocol_errors");
  EXPECT_EQ(c.counters[0].second, transport->protocol_errors());
  EXPECT_EQ(c.counters[1].first, "interrupts_sent");
  EXPECT_EQ(c.counters[2].first, "config_interrupts");
  transport->interrupt().signal_config_change();
  c = transport->counters();
  EXPECT_EQ(c.counters[1].second, 1u);  // vector 0 is programmed and unmasked
  EXPECT_EQ(c.counters[2].second, 1u);
}

}  // namespace
}  // namespace tern
