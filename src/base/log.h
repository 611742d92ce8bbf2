// Logging: spdlog, plus a rate limiter so guest-triggered messages cannot flood the log.
#pragma once

#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <cstdint>

namespace tern {

/// Allows at most `burst` events per `period`; the rest are counted as suppressed.
/// Thread-safe (lock-free); a little slack under races is acceptable.
class RateLimit {
 public:
  explicit RateLimit(uint32_t burst = 10,
                     std::chrono::nanoseconds period = std::chrono::seconds(1))
      : burst_(burst), period_ns_(period.count()) {}

  /// True if this event may be logged now. Suppressed events are counted in suppressed().
  bool allow() {
    int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count();
    int64_t start = window_start_.load(std::memory_order_relaxed);
    if (now - start >= period_ns_ &&
        window_start_.compare_exchange_strong(start, now, std::memory_order_relaxed)) {
      count_.store(0, std::memory_order_relaxed);
    }
    if (count_.fetch_add(1, std::memory_order_relaxed) < burst_) return true;
    suppressed_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  [[nodiscard]] uint64_t suppressed() const { return suppressed_.load(std::memory_order_relaxed); }

 private:
  const uint32_t burst_;
  const int64_t period_ns_;
  std::atomic<int64_t> window_start_{0};
  std::atomic<uint32_t> count_{0};
  std::atomic<uint64_t> suppressed_{0};
};

}  // namespace tern

/// Logs at `level` through spdlog if the given RateLimit allows it.
#define TERN_LOG_RATELIMITED(limit, level, ...)       \
  do {                                                \
    if ((limit).allow()) spdlog::level(__VA_ARGS__);  \
  } while (0)
