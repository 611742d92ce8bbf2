// TokenBucket: a token bucket rate limiter in Firecracker's RateLimiter shape (`size` tokens
// refilled at size / refill_time, plus a one-time burst used first). Time is passed in by the
// caller (nanoseconds on any monotonic clock), so tests drive it with a fake clock.
//
// Not thread-safe: one worker owns a bucket.
#pragma once

#include <cstdint>

namespace tern {

/// A token bucket of `size` tokens refilled continuously at `size` tokens per `refill_ns`
/// (Firecracker refills the same way), starting full, with `one_time_burst` extra tokens that are
/// spent first and never refilled.
class TokenBucket {
 public:
  /// `size` > 0 and `refill_ns` > 0 (validated by the caller's config checks; TERN_CHECKed).
  /// `now_ns`: the clock reading the bucket starts at.
  TokenBucket(uint64_t size, uint64_t one_time_burst, uint64_t refill_ns, uint64_t now_ns);

  /// Tokens available at `now_ns` (burst + refilled budget).
  [[nodiscard]] uint64_t available(uint64_t now_ns);
  /// Takes min(n, available(now_ns)) tokens; returns how many were taken.
  uint64_t take(uint64_t n, uint64_t now_ns);
  /// Nanoseconds from `now_ns` until at least `n` (<= size) tokens are available; 0 if they are.
  [[nodiscard]] uint64_t ns_until(uint64_t n, uint64_t now_ns);

  [[nodiscard]] uint64_t size() const { return size_; }

 private:
  void refill(uint64_t now_ns);

  uint64_t size_;
  uint64_t burst_;
  uint64_t refill_ns_;
  uint64_t tokens_;
  uint64_t last_ns_;
  uint64_t remainder_ = 0;  // refill numerator carried between calls (size * ns mod refill_ns)
};

}  // namespace tern
