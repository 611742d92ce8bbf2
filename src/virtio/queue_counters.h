// QueueCounters: the live per-queue counters a QueueWorker maintains (relaxed atomics). The
// device base owns one per queue for the device's whole life, so the counts survive resets and
// re-activations ("since the VM was built").
#pragma once

#include <atomic>
#include <cstdint>

#include "stats/device_counters.h"

namespace tern::virtio {

/// Per-queue counters; see QueueCountersSnapshot. Exactly, as QueueWorker maintains them:
/// - kicks: the sum of the values read from the kick eventfd (each KVM ioeventfd signal adds 1;
///   signals between two reads are coalesced by the eventfd but still add up here);
/// - requests: chains popped from the available ring, valid or malformed (a fatal ring error is
///   not a request);
/// - interrupts: signal_used_queue calls, one per used-ring publish the driver asked to hear of
///   (EVENT_IDX / NO_INTERRUPT); not a restore's one per queue (VirtioDeviceBase::activate);
/// - interrupts_suppressed: used-ring publishes that added >= 1 entry but needed no notification;
///   so interrupts + interrupts_suppressed + interrupts_coalesced = publishes that added entries
///   (<= requests: a batch of completions is one publish);
/// - interrupts_coalesced: publishes whose notification coalescing (NotifyTuning coalesce_us)
///   folded into another one (held, or sent with it): interrupts saved;
/// - poll_hits: times polling (NotifyTuning poll_us) found new entries before the time ran out
///   (each a notification the driver did not need to send); poll_ns: time spent polling;
/// - bytes / errors: what the device's handler reported in QueueWorker::complete().
struct QueueCounters {
  std::atomic<uint64_t> kicks{0}, requests{0}, interrupts{0}, interrupts_suppressed{0}, bytes{0},
      errors{0};
  std::atomic<uint64_t> interrupts_coalesced{0}, poll_hits{0}, poll_ns{0};
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
    s.interrupts_coalesced = g(interrupts_coalesced);
    s.poll_hits = g(poll_hits);
    s.poll_ns = g(poll_ns);
    s.bytes = g(bytes);
    s.errors = g(errors);
    return s;
  }
};

}  // namespace tern::virtio
