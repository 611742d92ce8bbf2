// VmStats: the StatsSource of one VM — exit accounting, device attribution, device and queue
// counters, KVM's in-kernel statistics and host CPU time per thread, as JSON (docs/stats.md) and
// Prometheus text. It only reads counters that live with their producers (bus/, vcpu/, kvm/, the
// devices' DeviceCounters); nothing below src/stats includes it.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "bus/bus.h"
#include "kvm/kvm_stats.h"
#include "stats/device_counters.h"
#include "stats/stats_source.h"
#include "vcpu/exit_stats.h"

namespace tern {

/// Collects references to the VM's counters while it is built (add_*/set_*, one thread, before any
/// vCPU runs), then serves snapshots to any thread (stats_json(), metrics_text()). Everything
/// referenced must outlive this object. Reading costs the hot path nothing: the counters are
/// relaxed atomics that the vCPU threads and devices bump anyway.
class VmStats : public StatsSource {
 public:
  /// Reads the VM's devices' counters at snapshot time (any thread); e.g. PciDevices::counters().
  using DeviceCountersFn = std::function<std::vector<DeviceCounters>()>;

  /// `devices` may be empty (no devices: "device_counters" is []).
  VmStats(const Bus& pio, const Bus& mmio, DeviceCountersFn devices)
      : pio_(pio), mmio_(mmio), devices_(std::move(devices)) {}

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
  DeviceCountersFn devices_;
  Result<KvmStatsReader> vm_kvm_ = fail("KVM_GET_STATS_FD", "not opened");
  std::vector<Vcpu> vcpus_;
};

/// JSON of `exits` (see docs/stats.md: vcpus[].exits).
nlohmann::json exit_stats_json(const ExitStats& exits);
/// JSON of one KVM stats fd: {"id", "counters", "gauges", "histograms"} or {"error"}.
nlohmann::json kvm_stats_json(const Result<KvmStatsReader>& reader);
/// JSON of a bus's unclaimed accesses.
nlohmann::json unclaimed_json(const UnclaimedTable& table);
/// JSON of the devices' counters (see docs/stats.md: device_counters[]): per device name, kind,
/// a "counters" object and a "queues" array with every QueueCountersSnapshot field.
nlohmann::json device_counters_json(const std::vector<DeviceCounters>& devices);

}  // namespace tern
