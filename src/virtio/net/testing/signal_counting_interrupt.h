// SignalCountingInterrupt: a VirtioInterrupt for the vhost-net tests that counts used-buffer
// signals per queue and lets a test wait for a count (condition variable + timeout; the timeout
// fails the test instead of hanging it). Unlike testing::FakeVirtioInterrupt, the wait predicate
// is a count, so no lock is taken twice. queue_irqfd() stays invalid: calls are relayed.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>

#include "virtio/virtio_device.h"

namespace tern::net::testing {

class SignalCountingInterrupt final : public VirtioInterrupt {
 public:
  void signal_used_queue(uint16_t queue) override {
    std::lock_guard lock(mu_);
    ++used_[queue];
    cv_.notify_all();
  }
  void signal_config_change() override {}
  void set_needs_reset() override {}
  /// Signals of `queue` so far.
  [[nodiscard]] uint64_t used(uint16_t queue) const {
    std::lock_guard lock(mu_);
    auto it = used_.find(queue);
    return it == used_.end() ? 0 : it->second;
  }
  /// Waits until `queue` had more than `than` signals (false after 20 s); returns the count.
  uint64_t wait_more(uint16_t queue, uint64_t than) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(20), [&] { return used_[queue] > than; });
    return used_[queue];
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint16_t, uint64_t> used_;
};

}  // namespace tern::net::testing
