// LatencyHistogram: count, sum, min, max and fixed log2 buckets of durations in ns.
#pragma once

#include <array>
#include <atomic>
#include <bit>
#include <cstdint>
#include <limits>

namespace tern {

/// A histogram of durations (ns) with one writer thread and any number of readers.
///
/// Bucket i (0..kFinite-1) counts values v with 2^(i-1) < v <= 2^i ns (bucket 0: v <= 1 ns), i.e.
/// its Prometheus `le` is 2^i; the last bucket (kBuckets-1) counts values above 2^32 ns (~4.3 s),
/// `le="+Inf"`. record() is wait-free and lock-free: plain relaxed loads and stores (no locked
/// read-modify-write), which is correct because only the owning thread writes. Readers see each
/// field atomically, not all fields at one instant.
class LatencyHistogram {
 public:
  static constexpr size_t kFinite = 33;  ///< le = 2^0 .. 2^32 ns
  static constexpr size_t kBuckets = kFinite + 1;

  /// The bucket index for `ns`.
  static constexpr size_t bucket_of(uint64_t ns) {
    if (ns <= 1) return 0;
    size_t b = static_cast<size_t>(std::bit_width(ns - 1));
    return b < kFinite ? b : kFinite;
  }
  /// Upper bound (inclusive) of finite bucket `i` in ns.
  static constexpr uint64_t bucket_le(size_t i) { return uint64_t{1} << i; }

  /// Records one value. Owning thread only.
  void record(uint64_t ns) {
    bump(count_, 1);
    bump(sum_, ns);
    bump(buckets_[bucket_of(ns)], 1);
    if (ns < min_.load(std::memory_order_relaxed)) min_.store(ns, std::memory_order_relaxed);
    if (ns > max_.load(std::memory_order_relaxed)) max_.store(ns, std::memory_order_relaxed);
  }

  /// A copy of the histogram (min_ns is 0 when count is 0).
  struct Snapshot {
    uint64_t count = 0;
    uint64_t sum_ns = 0;
    uint64_t min_ns = 0;
    uint64_t max_ns = 0;
    std::array<uint64_t, kBuckets> buckets{};
  };
  [[nodiscard]] Snapshot snapshot() const {
    Snapshot s;
    s.count = count_.load(std::memory_order_relaxed);
    s.sum_ns = sum_.load(std::memory_order_relaxed);
    uint64_t mn = min_.load(std::memory_order_relaxed);
    s.min_ns = mn == kNoMin ? 0 : mn;
    s.max_ns = max_.load(std::memory_order_relaxed);
    for (size_t i = 0; i < kBuckets; ++i)
      s.buckets[i] = buckets_[i].load(std::memory_order_relaxed);
    return s;
  }
  [[nodiscard]] uint64_t count() const { return count_.load(std::memory_order_relaxed); }

 private:
  static constexpr uint64_t kNoMin = std::numeric_limits<uint64_t>::max();
  static void bump(std::atomic<uint64_t>& a, uint64_t n) {
    a.store(a.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> sum_{0};
  std::atomic<uint64_t> min_{kNoMin};
  std::atomic<uint64_t> max_{0};
  std::array<std::atomic<uint64_t>, kBuckets> buckets_{};
};

}  // namespace tern
