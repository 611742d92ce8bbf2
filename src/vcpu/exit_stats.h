// ExitStats: per-vCPU accounting of KVM exits by exit reason (KVM_EXIT_*): a count and a histogram
// of the time tern spent handling the exit before re-entering KVM_RUN (ns).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include "base/latency_histogram.h"

namespace tern {

/// Written by one vCPU thread (record()), read by anyone (relaxed atomics, see LatencyHistogram).
class ExitStats {
 public:
  static constexpr size_t kMaxReason = 64;  ///< KVM_EXIT_* values are below this.

  /// Slot for `reason`; out-of-range reasons share the last slot.
  static constexpr size_t slot(uint32_t reason) {
    return reason < kMaxReason ? reason : kMaxReason - 1;
  }

  /// Counts one exit with reason `reason` that tern handled in `handling_ns` ns. vCPU thread only.
  void record(uint32_t reason, uint64_t handling_ns) { hist_[slot(reason)].record(handling_ns); }

  /// Counts one return of KVM_RUN (any result), independently of record(): the total of userspace
  /// exits, which the per-reason counts must add up to. vCPU thread only.
  void count_run_return() {
    run_returns_.store(run_returns_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  /// Returns of KVM_RUN counted by count_run_return().
  [[nodiscard]] uint64_t run_returns() const {
    return run_returns_.load(std::memory_order_relaxed);
  }

  /// Exits counted with `reason`.
  [[nodiscard]] uint64_t get(uint32_t reason) const {
    return reason < kMaxReason ? hist_[reason].count() : 0;
  }
  /// Exits counted over all reasons.
  [[nodiscard]] uint64_t total() const {
    uint64_t t = 0;
    for (const auto& h : hist_) t += h.count();
    return t;
  }
  /// The handling-time histogram (ns) of `reason`.
  [[nodiscard]] const LatencyHistogram& histogram(uint32_t reason) const {
    return hist_[slot(reason)];
  }

 private:
  std::array<LatencyHistogram, kMaxReason> hist_{};
  std::atomic<uint64_t> run_returns_{0};
};

/// "KVM_EXIT_IO", "KVM_EXIT_MMIO", ... or "KVM_EXIT_<n>".
std::string exit_reason_name(uint32_t reason);

}  // namespace tern
