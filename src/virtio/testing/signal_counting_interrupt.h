// SignalCountingInterrupt: a VirtioInterrupt for the vhost-net and vhost-user tests that counts used-buffer
// signals per queue and lets a test wait for a count (condition variable + timeout; the timeout
// fails the test instead of hanging it). Unlike testing::FakeVirtioInterrupt, the wait predicate
// is a count, so no lock is taken twice. queue_irqfd() is invalid (calls are relayed) except for
// a queue given one with set_irqfd().
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>

#include "virtio/virtio_device.h"

namespace tern::virtio::testing {

class SignalCountingInterrupt final : public VirtioInterrupt {
 public:
  void signal_used_queue(uint16_t queue) override {
    std::lock_guard lock(mu_);
    ++used_[queue];
    ++total_;
    cv_.notify_all();
  }
  [[nodiscard]] BorrowedFd queue_irqfd(uint16_t queue) const override {
    std::lock_guard lock(mu_);
    auto it = irqfds_.find(queue);
    return it == irqfds_.end() ? BorrowedFd(-1) : it->second;
  }
  /// Makes queue_irqfd(queue) return `fd` (a test's eventfd standing for a KVM irqfd).
  void set_irqfd(uint16_t queue, BorrowedFd fd) {
    std::lock_guard lock(mu_);
    irqfds_.insert_or_assign(queue, fd);
  }
  void signal_config_change() override {}
  void set_needs_reset() override { needs_reset_.fetch_add(1); }
  /// set_needs_reset() calls so far.
  [[nodiscard]] uint64_t needs_reset() const { return needs_reset_.load(); }
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
  /// Waits until all queues together had more than `than` signals (false after 20 s); returns
  /// the total.
  uint64_t wait_total_more(uint64_t than) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(20), [&] { return total_ > than; });
    return total_;
  }

 private:
  std::atomic<uint64_t> needs_reset_{0};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint16_t, uint64_t> used_;
  uint64_t total_ = 0;
  std::map<uint16_t, BorrowedFd> irqfds_;
};

}  // namespace tern::virtio::testing
