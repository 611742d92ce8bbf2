// Checking an RngConfig (src/virtio/rng/rng_config.h) — the virtio-rng device as configured by
// --rng, PUT /entropy, a config file's "entropy" or a snapshot — before anything is created.
#pragma once

#include <string>

#include "base/result.h"
#include "virtio/rng/rng_config.h"

namespace tern {

/// Largest token bucket size, burst or refill time tern accepts (2^50: beyond any real limit,
/// far from overflowing the rate arithmetic).
inline constexpr uint64_t kMaxTokenBucketValue = uint64_t{1} << 50;

/// Each bucket given has size > 0 and refill_time_ms > 0, every value ≤ kMaxTokenBucketValue.
/// Errors name the field as Firecracker's body does, under `where`
/// ("entropy.rate_limiter.bandwidth.size"; `where` empty: "rate_limiter.bandwidth.size").
[[nodiscard]] Result<void> check_rng_config(const RngConfig& c, const std::string& where);

}  // namespace tern
