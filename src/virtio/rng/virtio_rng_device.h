// VirtioRng: the virtio entropy device (virtio 1.2 §5.4) on VirtioDeviceBase. Device ID 4, one
// queue ("requestq"), features VERSION_1 + INDIRECT_DESC + EVENT_IDX, no configuration space.
// Every chain's device-writable buffers are filled from getrandom(2) straight into guest memory
// (the walker's validated views), at most kMaxBytesPerRequest per chain, within the configured
// rate limit (a bandwidth and/or operations TokenBucket). While throttled the worker takes no
// chains and waits on a timerfd in its epoll for the next token.
//
// No device state beyond the queue positions (the base saves them). The rate limiter is not
// saved: after a restore (or a rebuild) its buckets start full.
//
// Thread-safety: as VirtioDeviceBase; the buckets are used only by the one queue worker (a new
// worker starts only after reset() joined the previous one).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "base/result.h"
#include "base/token_bucket.h"
#include "virtio/rng/rng_config.h"
#include "virtio/virtio_device_base.h"

namespace tern {

/// Checks `config`: each bucket present needs size > 0 and refill_time_ms > 0. Errors have op
/// "--rng" and name the field, e.g. "rate_limiter.bandwidth.size: must be > 0".
[[nodiscard]] Result<void> validate_rng_config(const RngConfig& config);

/// See the file comment.
class VirtioRng final : public virtio::VirtioDeviceBase {
 public:
  static constexpr uint32_t kMaxBytesPerRequest = 64 * 1024;  ///< Bytes supplied per chain, at most.
  static constexpr uint16_t kQueueSize = 256;                 ///< max_queue_size().
  /// Monotonic time in nanoseconds (tests pass a fake clock).
  using Clock = std::function<uint64_t()>;

  /// Validates `config` (validate_rng_config) and builds the device. `clock` empty = the
  /// steady clock.
  [[nodiscard]] static Result<std::shared_ptr<VirtioRng>> create(const RngConfig& config,
                                                                std::string name = "virtio-rng0",
                                                                Clock clock = {});
  ~VirtioRng() override;

  /// No configuration space (§5.4.4): reads return zeros, writes are ignored.
  void read_config(uint64_t offset, std::span<uint8_t> data) override;
  void write_config(uint64_t, std::span<const uint8_t>) override {}

  /// Live counters (any thread).
  struct Counters {
    std::atomic<uint64_t> bytes{0};        ///< Entropy bytes written into guest buffers.
    std::atomic<uint64_t> requests{0};     ///< Chains answered (not counting malformed ones).
    std::atomic<uint64_t> throttled{0};    ///< Times the rate limit stopped the queue.
    std::atomic<uint64_t> no_buffer{0};    ///< Chains without a device-writable buffer.
    std::atomic<uint64_t> entropy_errors{0};  ///< getrandom(2) failures (logged, never fatal).
    static void add(std::atomic<uint64_t>& c, uint64_t n = 1) {
      c.fetch_add(n, std::memory_order_relaxed);
    }
  };
  [[nodiscard]] const Counters& rng_counters() const { return counters_; }
  [[nodiscard]] const RngConfig& config() const { return config_; }

 protected:
  [[nodiscard]] Result<std::unique_ptr<virtio::QueueHandler>> make_queue_handler(
      uint16_t index, const VirtqueueConfig& queue, uint64_t acked) override;
  /// bytes, requests, throttled, no_buffer, entropy_errors, malformed_chains, needs_reset.
  void device_counters(std::vector<std::pair<std::string, uint64_t>>& out) const override;

 private:
  friend class RngQueueHandler;
  VirtioRng(RngConfig config, std::string name, Clock clock);

  RngConfig config_;
  Clock clock_;
  Counters counters_;
  // The rate limit, used by the queue worker only; kept across resets so a guest cannot refill
  // it by resetting the device.
  std::optional<TokenBucket> bandwidth_;
  std::optional<TokenBucket> ops_;
};

}  // namespace tern
