#include "virtio/rng/rng_spec.h"

namespace tern {

namespace {

Result<void> check_bucket(const TokenBucketConfig& b, const std::string& where) {
  if (b.size == 0) return fail(where + ".size", "must be greater than 0");
  if (b.refill_time_ms == 0) return fail(where + ".refill_time", "must be greater than 0");
  for (auto [v, name] : {std::pair{b.size, "size"}, std::pair{b.one_time_burst, "one_time_burst"},
                         std::pair{b.refill_time_ms, "refill_time"}})
    if (v > kMaxTokenBucketValue)
      return fail(where + "." + name, std::to_string(v) + " is too large (at most 2^50)");
  return {};
}

}  // namespace

Result<void> check_rng_config(const RngConfig& c, const std::string& where) {
  std::string rl = where.empty() ? "rate_limiter" : where + ".rate_limiter";
  if (c.rate_limiter.bandwidth) TRY(check_bucket(*c.rate_limiter.bandwidth, rl + ".bandwidth"));
  if (c.rate_limiter.ops) TRY(check_bucket(*c.rate_limiter.ops, rl + ".ops"));
  return {};
}

}  // namespace tern
