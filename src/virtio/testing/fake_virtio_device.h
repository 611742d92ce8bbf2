// FakeVirtioDevice (tests and fuzzers only): a thread-less VirtioDevice behind a transport. It
// records what the transport hands it on activate(), refuses activation when queue 0 is not
// enabled (as a block device would), and has a 16-byte config space whose last 8 bytes are
// writable and saved as its device state.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "virtio/virtio_device.h"
#include "virtio/virtio_spec.h"

namespace tern::testing {

class FakeVirtioDevice final : public VirtioDevice {
 public:
  static constexpr uint64_t kExtraFeature = 1ull << 1;  ///< offered besides VERSION_1
  static constexpr size_t kConfigSize = 16;
  static constexpr size_t kWritableFrom = 8;

  explicit FakeVirtioDevice(uint16_t queues = 2, uint16_t max_queue_size = 256)
      : queues_(queues), max_queue_size_(max_queue_size) {
    for (size_t i = 0; i < kConfigSize; ++i) config[i] = static_cast<uint8_t>(0xA0 + i);
  }

  uint32_t device_type() const override { return 2; }
  std::string_view name() const override { return "fake-blk"; }
  uint64_t device_features() const override {
    return virtio::feature(virtio::VIRTIO_F_VERSION_1) | kExtraFeature;
  }
  uint16_t num_queues() const override { return queues_; }
  uint16_t max_queue_size() const override { return max_queue_size_; }
  void read_config(uint64_t offset, std::span<uint8_t> data) override {
    for (size_t i = 0; i < data.size(); ++i)
      data[i] = offset + i < kConfigSize ? config[offset + i] : 0;
  }
  void write_config(uint64_t offset, std::span<const uint8_t> data) override {
    for (size_t i = 0; i < data.size(); ++i)
      if (offset + i >= kWritableFrom && offset + i < kConfigSize) config[offset + i] = data[i];
  }
  Result<void> activate(const GuestMemory&, uint64_t features, std::vector<VirtqueueConfig> q,
                        std::vector<UniqueFd> k, std::shared_ptr<VirtioInterrupt> irq) override {
    if (active) ++activations_while_active;
    if (q.empty() || !q[0].enabled) return fail("activate", "queue 0 is not enabled");
    active = true;
    acked = features;
    queues = std::move(q);
    kicks = std::move(k);
    interrupt = std::move(irq);
    ++activations;
    return {};
  }
  void reset() override {
    active = false;
    queues.clear();
    kicks.clear();
    interrupt.reset();
  }
  std::vector<QueuePosition> queue_positions() const override {
    std::vector<QueuePosition> p(queues_);
    for (size_t i = 0; i < queues.size() && i < p.size(); ++i) p[i] = queues[i].position;
    return p;
  }
  void save_device_state(snap::ByteWriter& w) const override {
    w.bytes(std::span<const uint8_t>(config).subspan(kWritableFrom));
  }
  Result<void> restore_device_state(snap::ByteReader& r) override {
    ASSIGN_OR_RETURN(auto b, r.bytes(kConfigSize - kWritableFrom));
    std::copy(b.begin(), b.end(), config.begin() + kWritableFrom);
    return {};
  }

  std::array<uint8_t, kConfigSize> config{};
  bool active = false;
  int activations = 0;
  int activations_while_active = 0;  ///< activate() without reset() in between: a transport bug
  uint64_t acked = 0;
  std::vector<VirtqueueConfig> queues;
  std::vector<UniqueFd> kicks;
  std::shared_ptr<VirtioInterrupt> interrupt;

 private:
  uint16_t queues_;
  uint16_t max_queue_size_;
};

}  // namespace tern::testing
