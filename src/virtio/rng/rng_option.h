// The --rng command-line option: "[bandwidth=SIZE][,ops=N][,refill_time=MS][,one_time_burst=SIZE]"
// parsed into an RngConfig (virtio/rng/rng_config.h), Firecracker's rate limiter fields by name.
#pragma once

#include <string_view>

#include "base/result.h"
#include "virtio/rng/rng_config.h"

namespace tern {

/// Parses one --rng value; empty (`--rng` alone) is the device without a rate limit. Keys, each
/// at most once, in any order:
///   bandwidth=SIZE       bytes per refill period (the bandwidth bucket's size): a byte count
///                        or a size with K, M, G suffix ("1M" = 1 MiB)
///   ops=N                requests per refill period (the ops bucket's size)
///   refill_time=MS       refill period of the buckets given, in ms (default 1000)
///   one_time_burst=SIZE  extra bytes usable once at start (needs bandwidth=)
/// Errors name the field ("--rng bandwidth: ..."). The result passes check_rng_config().
[[nodiscard]] Result<RngConfig> parse_rng_option(std::string_view text);

}  // namespace tern
