// ExitStats: per-vCPU counts of KVM exits by exit reason (KVM_EXIT_*).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

namespace tern {

/// Counters written by one vCPU thread and read by anyone (relaxed atomics).
class ExitStats {
 public:
  static constexpr size_t kMaxReason = 64;  ///< KVM_EXIT_* values are below this.

  void count(uint32_t reason) {
    counts_[reason < kMaxReason ? reason : kMaxReason - 1].fetch_add(1, std::memory_order_relaxed);
  }
  [[nodiscard]] uint64_t get(uint32_t reason) const {
    return reason < kMaxReason ? counts_[reason].load(std::memory_order_relaxed) : 0;
  }
  [[nodiscard]] uint64_t total() const {
    uint64_t t = 0;
    for (const auto& c : counts_) t += c.load(std::memory_order_relaxed);
    return t;
  }

 private:
  std::array<std::atomic<uint64_t>, kMaxReason> counts_{};
};

/// "KVM_EXIT_IO", "KVM_EXIT_MMIO", ... or "KVM_EXIT_<n>".
std::string exit_reason_name(uint32_t reason);

}  // namespace tern
