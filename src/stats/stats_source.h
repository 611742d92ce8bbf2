// StatsSource: what the control API serves at GET /tern/stats and GET /tern/metrics.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace tern {

/// A live view of a VM's statistics. Implemented by the stats module (src/stats/), served by the
/// API (src/api/) and printed by `tern run --stats-on-exit`. Thread-safe: any thread may call
/// these at any time while the VM exists; values are read with relaxed atomics, so a snapshot is
/// consistent per counter, not across counters.
class StatsSource {
 public:
  virtual ~StatsSource() = default;
  /// The GET /tern/stats body: exits by vCPU and reason (count, time histogram in ns), by device
  /// (PIO/MMIO ranges, "unclaimed" with port/address), each device's counters (per queue: kicks,
  /// requests, interrupts sent and suppressed, bytes, errors; device-wide named counters), KVM
  /// in-kernel statistics (VM and per vCPU), CPU time per tern thread.
  [[nodiscard]] virtual nlohmann::json stats_json() const = 0;
  /// The GET /tern/metrics body: Prometheus text exposition format 0.0.4, names `tern_...`,
  /// labels vcpu, reason, device, kind, queue (docs/stats.md).
  [[nodiscard]] virtual std::string metrics_text() const = 0;
};

}  // namespace tern
