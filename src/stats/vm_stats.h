// VmStats: the StatsSource of one VM — exit accounting, device attribution, queue counters, KVM's
// in-kernel statistics and host CPU time per thread, as JSON (docs/stats.md) and Prometheus text.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "bus/bus.h"
#include "kvm/kvm_stats.h"
#include "stats/queue_counters.h"
#include "stats/stats_source.h"
#include "vcpu/exit_stats.h"

namespace tern {

/// Collects references to the VM's counters while it is built (add_*/set_*, one thread, before any
/// vCPU runs), then serves snapshots to any thread (stats_json(), metrics_text()). Everything
/// referenced must outlive this object. Reading costs the hot path nothing: the counters are
/// relaxed atomics that the vCPU threads and devices bump anyway.
class VmStats : public StatsSource {
 public:
  VmStats(const Bus& pio, const Bus& mmio, const QueueCounterRegistry& queues)
      : pio_(pio), mmio_(mmio), queues_(queues) {}

  /// KVM's VM statistics (KvmStatsReader::open(vm fd)); an error is shown as
  /// "kvm in-kernel stats unavailable: <reason>".
  void set_vm_kvm_stats(Result<KvmStatsReader> reader) { vm_kvm_ = std::move(reader); }
  /// A vCPU: its exit accounting and its KVM statistics (or why they are unavailable).
  void add_vcpu(uint32_t id, const ExitStats& exits, Result<KvmStatsReader> kvm);

  /// The GET /tern/stats body (shape: docs/stats.md).
  [[nodiscard]] nlohmann::json stats_json() const override;
  /// The GET /tern/metrics body (Prometheus text format 0.0.4).
  [[nodiscard]] std::string metrics_text() const override;

 private:
  struct Vcpu {
    uint32_t id;
    const ExitStats* exits;
    Result<KvmStatsReader> kvm;
  };
  const Bus& pio_;
  const Bus& mmio_;
  const QueueCounterRegistry& queues_;
  Result<KvmStatsReader> vm_kvm_ = fail("KVM_GET_STATS_FD", "not opened");
  std::vector<Vcpu> vcpus_;
};

/// JSON of `exits` (see docs/stats.md: vcpus[].exits).
nlohmann::json exit_stats_json(const ExitStats& exits);
/// JSON of one KVM stats fd: {"id", "counters", "gauges", "histograms"} or {"error"}.
nlohmann::json kvm_stats_json(const Result<KvmStatsReader>& reader);
/// JSON of a bus's unclaimed accesses.
nlohmann::json unclaimed_json(const UnclaimedTable& table);

}  // namespace tern
