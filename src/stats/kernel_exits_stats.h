// KernelExitsStats: the stats side of in-kernel exit accounting (issue 15). It owns the running
// KernelExitTrace (src/trace/kernel_exit_trace.h) while enabled, keeps the baselines taken when it
// started (KVM's `exits` summed over the vCPUs, tern's own KVM_RUN returns, the PIO bus's
// counters), and renders one reading as the "kernel_exits" object of GET /tern/stats: exits by
// hardware reason reconciled with KVM's own counter, MSRs, in-kernel PIO, nested page faults with
// MMIO pages attributed to tern's devices, injected vectors. docs/stats.md, "In-kernel exits".
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/result.h"
#include "bus/bus.h"
#include "trace/kernel_exit_trace.h"

namespace tern {

/// A started in-kernel trace: KernelExitTrace for real, a fake in tests. read() may be called
/// from any thread.
class KernelExitSource {
 public:
  virtual ~KernelExitSource() = default;
  /// Cumulative counts since the source started.
  [[nodiscard]] virtual Result<KernelExitCounts> read() const = 0;
};

/// Loads and attaches a KernelExitSource (no exit is counted before it returns), or says why it
/// cannot.
using KernelExitStarter = std::function<Result<std::unique_ptr<KernelExitSource>>()>;

/// The real starter: KernelExitTrace::start(options) (tgid = tern's pid, the VM's RAM ranges).
[[nodiscard]] KernelExitStarter kernel_exit_trace_starter(KernelExitTrace::Options options);

/// What KernelExitsStats reads besides the trace. All of it must outlive the KernelExitsStats and
/// be callable from any thread.
struct KernelExitsInputs {
  KernelExitStarter start;
  /// KVM's `exits` (KVM_GET_STATS_FD) summed over the VM's vCPUs, cumulative since they were
  /// created; an error when a vCPU's stats fd is unavailable (then nothing is reconciled).
  std::function<Result<uint64_t>()> kvm_exits;
  /// tern's own KVM_RUN returns summed over the vCPUs (ExitStats::run_returns()), cumulative.
  std::function<uint64_t()> userspace_exits;
  uint32_t vcpus = 0;
  /// tern's buses: the PIO bus's per-range and unclaimed counters give the PIO exits that
  /// reached tern (subtracted from kvm_pio for in-kernel PIO); the MMIO bus names the device of
  /// an MMIO nested page fault's page. Either may be null (no attribution).
  const Bus* pio = nullptr;
  const Bus* mmio = nullptr;
};

/// Thread-safe: enable(), disable(), enabled() and json() may be called from any thread at any
/// time (one mutex; json() holds it for the map reads, enable() for the program load).
class KernelExitsStats {
 public:
  explicit KernelExitsStats(KernelExitsInputs in) : in_(std::move(in)) {}

  /// Starts the accounting (no-op when it runs). The counts start from zero: baselines are taken
  /// right after the programs are attached. On failure the reason is returned and kept for
  /// json() ({"enabled": false, "error": reason}) until the next enable().
  [[nodiscard]] Result<void> enable();
  /// Stops the accounting (detaches the programs; no-op when off). json() is {"enabled": false}.
  void disable();
  [[nodiscard]] bool enabled() const;

  /// The "kernel_exits" object of GET /tern/stats (shape: docs/stats.md, "In-kernel exits").
  /// Sampling order: KVM `exits`, the maps, KVM `exits` again; kvm_exits is the second reading
  /// minus the baseline, kvm_exits_edge the exits between the two readings.
  [[nodiscard]] nlohmann::json json() const;

 private:
  struct PioBaseline {
    std::vector<Bus::RangeStats> ranges;
    UnclaimedTable::Snapshot unclaimed;
  };
  PioBaseline pio_now() const;

  KernelExitsInputs in_;
  mutable std::mutex mu_;
  std::unique_ptr<KernelExitSource> source_;  // null: off
  std::string error_;                         // why the last enable() failed
  uint64_t since_ns_ = 0;                     // monotonic ns when it started
  Result<uint64_t> kvm_base_ = 0;             // KVM exits right after the attach
  uint64_t kvm_start_edge_ = 0;               // KVM exits during the attach
  uint64_t user_base_ = 0;
  PioBaseline pio_base_;
};

/// In-kernel PIO: kvm_pio counts (`counts.pio`, cumulative since `base` was taken) minus the PIO
/// exits that reached tern in the same interval (`now` - `base` of tern's PIO bus). Ports inside a
/// range of one of tern's devices are grouped per device and direction (tern counts accesses per
/// range, not per port); other ports stand alone, their userspace exits from the bus's unclaimed
/// table (exact per port; ports in its "other" bucket count as in-kernel). Sorted by in-kernel
/// count, descending. Rows: {"port": "0x40" | "0x3f8-0x3ff", "device" (tern's, when it has
/// one), "dir": "in"|"out", "kvm_pio", "userspace", "in_kernel"}.
[[nodiscard]] nlohmann::json in_kernel_pio_json(const std::vector<KernelPioAccess>& pio,
                                                const std::vector<Bus::RangeStats>& base_ranges,
                                                const std::vector<Bus::RangeStats>& now_ranges,
                                                const UnclaimedTable::Snapshot& base_unclaimed,
                                                const UnclaimedTable::Snapshot& now_unclaimed);

/// The device whose MMIO range holds a byte of the 4 KiB page `gpa_page` (guest-physical >> 12):
/// tern's MMIO bus first, then KVM's own in-kernel devices ("kvm-ioapic" at 0xfec00000,
/// "kvm-lapic" at 0xfee00000), else "unclaimed".
[[nodiscard]] std::string mmio_page_device(const std::vector<Bus::RangeStats>& mmio_ranges,
                                           uint64_t gpa_page);

}  // namespace tern
