// RngConfig: what the user asked for the entropy device (--rng, Firecracker's PUT /entropy body),
// before anything is created. Plain value; VirtioRng::create() validates it.
#pragma once

#include <cstdint>
#include <optional>

namespace tern {

/// A token bucket as Firecracker's API describes one (`TokenBucket`): `size` tokens, refilled
/// completely every `refill_time_ms`, plus `one_time_burst` extra tokens usable once.
struct TokenBucketConfig {
  uint64_t size = 0;            ///< Tokens (bytes or operations) per refill period; > 0.
  uint64_t one_time_burst = 0;  ///< Extra tokens available once at start.
  uint64_t refill_time_ms = 0;  ///< Refill period in milliseconds; > 0.
  bool operator==(const TokenBucketConfig&) const = default;
};

/// Firecracker's `RateLimiter`: a bandwidth bucket (bytes) and an operations bucket (requests);
/// either may be absent (unlimited).
struct RateLimiterConfig {
  std::optional<TokenBucketConfig> bandwidth;
  std::optional<TokenBucketConfig> ops;
  bool operator==(const RateLimiterConfig&) const = default;
};

/// The virtio-rng (entropy) device as configured.
struct RngConfig {
  RateLimiterConfig rate_limiter;  ///< Empty: as fast as getrandom(2) supplies.
  bool operator==(const RngConfig&) const = default;
};

}  // namespace tern
