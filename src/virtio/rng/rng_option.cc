#include "virtio/rng/rng_option.h"

#include <charconv>
#include <string>

#include "base/key_value_list.h"
#include "base/size.h"
#include "virtio/rng/rng_spec.h"

namespace tern {

namespace {

constexpr const char* kKeys = "keys: bandwidth, ops, refill_time, one_time_burst";

// A whole number; 0 only where `allow_zero` (one_time_burst: 0 is its default, as in the API).
Result<uint64_t> parse_count(std::string_view v, const std::string& field, bool allow_zero = false) {
  uint64_t n = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec == std::errc::result_out_of_range && p == v.data() + v.size())
    return fail(field, "'" + std::string(v) + "' is too large");
  if (v.empty() || ec != std::errc() || p != v.data() + v.size())
    return fail(field, "'" + std::string(v) + "' is not a number");
  if (n == 0 && !allow_zero) return fail(field, "must be greater than 0");
  if (n > kMaxTokenBucketValue) return fail(field, "'" + std::string(v) + "' is too large");
  return n;
}

// A byte count: bare digits are bytes, a suffix (K, M, G, T) as --memory takes it.
Result<uint64_t> parse_bytes(std::string_view v, const std::string& field,
                             bool allow_zero = false) {
  if (!v.empty() && v.find_first_not_of("0123456789") == std::string_view::npos)
    return parse_count(v, field, allow_zero);
  ASSIGN_OR_RETURN(uint64_t n, parse_size(v, field));
  if (n > kMaxTokenBucketValue) return fail(field, "'" + std::string(v) + "' is too large");
  return n;
}

}  // namespace

Result<RngConfig> parse_rng_option(std::string_view text) {
  RngConfig c;
  if (text.empty()) return c;
  std::optional<uint64_t> bandwidth, ops, burst;
  uint64_t refill_ms = 1000;
  bool refill_given = false;
  ASSIGN_OR_RETURN(auto items, split_key_values(text, "--rng", kKeys));
  for (auto [k, value] : items) {
    std::string key(k);
    std::string field = "--rng " + key;
    if (key == "bandwidth") {
      ASSIGN_OR_RETURN(bandwidth, parse_bytes(value, field));
    } else if (key == "ops") {
      ASSIGN_OR_RETURN(ops, parse_count(value, field));
    } else if (key == "refill_time") {
      ASSIGN_OR_RETURN(refill_ms, parse_count(value, field));
      refill_given = true;
    } else if (key == "one_time_burst") {
      ASSIGN_OR_RETURN(burst, parse_bytes(value, field, /*allow_zero=*/true));
    } else {
      return fail(field, std::string("unknown key (") + kKeys + ")");
    }
  }
  if (burst && !bandwidth)
    return fail("--rng one_time_burst", "needs bandwidth= (the burst is extra bytes)");
  if (refill_given && !bandwidth && !ops)
    return fail("--rng refill_time", "needs bandwidth= or ops= (the buckets it refills)");
  if (bandwidth)
    c.rate_limiter.bandwidth = TokenBucketConfig{*bandwidth, burst.value_or(0), refill_ms};
  if (ops) c.rate_limiter.ops = TokenBucketConfig{*ops, 0, refill_ms};
  if (auto ok = check_rng_config(c, ""); !ok) return fail("--rng", ok.error().message());
  return c;
}

}  // namespace tern
