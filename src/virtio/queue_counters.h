// QueueCounters: the live per-queue counters a QueueWorker maintains (relaxed atomics). The
// device base owns one per queue for the device's whole life, so the counts survive resets and
// re-activations ("since the VM was built").
#pragma once

#include <atomic>
#include <cstdint>

#include "stats/device_counters.h"

namespace tern::virtio {

/// Per-queue counters; see QueueCountersSnapshot for the meaning of each field.
struct QueueCounters {
  std::atomic<uint64_t> kicks{0}, requests{0}, interrupts{0}, interrupts_suppressed{0}, bytes{0},
      errors{0};
  std::atomic<uint64_t> malformed{0};    ///< Chains the walker refused (returned with len 0).
  std::atomic<uint64_t> needs_reset{0};  ///< Times this queue was found broken.

  static void add(std::atomic<uint64_t>& c, uint64_t n = 1) {
    c.fetch_add(n, std::memory_order_relaxed);
  }
  [[nodiscard]] QueueCountersSnapshot snapshot(uint16_t index) const {
    auto g = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
    QueueCountersSnapshot s;
    s.index = index;
    s.kicks = g(kicks);
    s.requests = g(requests);
    s.interrupts = g(interrupts);
    s.interrupts_suppressed = g(interrupts_suppressed);
    s.bytes = g(bytes);
    s.errors = g(errors);
    return s;
  }
};

}  // namespace tern::virtio
