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
#include "stats/kernel_exits_stats.h"
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

  /// In-kernel exit accounting (docs/stats.md, "In-kernel exits"): `start` loads the trace
  /// whenever it is enabled. Call after every add_vcpu(); before, kernel_exits() is null and
  /// "kernel_exits" is {"enabled": false}.
  void set_kernel_exit_starter(KernelExitStarter start);
  /// The accounting's switch and reader (thread-safe), or null (see set_kernel_exit_starter()).
  [[nodiscard]] KernelExitsStats* kernel_exits() const { return kernel_.get(); }
  /// KVM's `exits` summed over the vCPUs (an error when a vCPU has no stats fd). Any thread.
  [[nodiscard]] Result<uint64_t> kvm_exits() const;

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
  std::unique_ptr<KernelExitsStats> kernel_;
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
