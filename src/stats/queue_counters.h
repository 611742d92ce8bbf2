// QueueCounters and QueueCounterRegistry: ioeventfd kicks and irqfd injections per device queue.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace tern {

/// Counters of one device queue, e.g. "virtio-blk0/q0". Any thread may bump them (relaxed).
///
/// kicks: KVM consumes the guest's notify write itself and only signals the queue's ioeventfd, so
/// tern never sees individual kicks: the device worker adds the value it reads from the eventfd
/// (an eventfd read returns the number of signals since the previous read), i.e.
/// `add_kicks(value)`. interrupts: the device calls `add_interrupt()` each time it writes the
/// queue's irqfd (or otherwise injects its interrupt).
struct QueueCounters {
  explicit QueueCounters(std::string n) : name(std::move(n)) {}
  void add_kicks(uint64_t n) { kicks.fetch_add(n, std::memory_order_relaxed); }
  void add_interrupt() { interrupts.fetch_add(1, std::memory_order_relaxed); }

  const std::string name;
  std::atomic<uint64_t> kicks{0};       ///< ioeventfd signals (count)
  std::atomic<uint64_t> interrupts{0};  ///< irqfd injections (count)
};

/// The VM's list of queues. Devices register while the VM is built or activated (any thread);
/// stats readers take a snapshot.
class QueueCounterRegistry {
 public:
  /// Registers (or returns the existing) counters named `name`. Keep the pointer; bump it on the
  /// device's own threads.
  std::shared_ptr<QueueCounters> add(const std::string& name) {
    std::lock_guard lock(mu_);
    for (const auto& q : queues_)
      if (q->name == name) return q;
    queues_.push_back(std::make_shared<QueueCounters>(name));
    return queues_.back();
  }
  /// The registered queues in registration order.
  [[nodiscard]] std::vector<std::shared_ptr<const QueueCounters>> list() const {
    std::lock_guard lock(mu_);
    return {queues_.begin(), queues_.end()};
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<QueueCounters>> queues_;
};

}  // namespace tern
