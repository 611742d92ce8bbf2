#include "virtio/rng/rng_option.h"

#include <charconv>
#include <set>
#include <string>

#include "base/size.h"
#include "virtio/rng/rng_spec.h"

namespace tern {

namespace {

constexpr const char* kKeys = "keys: bandwidth, ops, refill_time, one_time_burst";

Result<uint64_t> parse_count(std::string_view v, const std::string& field) {
  uint64_t n = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (v.empty() || ec != std::errc() || p != v.data() + v.size())
    return fail(field, "'" + std::string(v) + "' is not a number");
  if (n == 0) return fail(field, "must be greater than 0");
  if (n > kMaxTokenBucketValue) return fail(field, "'" + std::string(v) + "' is too large");
  return n;
}

// A byte count: bare digits are bytes, a suffix (K, M, G, T) as --memory takes it.
Result<uint64_t> parse_bytes(std::string_view v, const std::string& field) {
  if (!v.empty() && v.find_first_not_of("0123456789") == std::string_view::npos)
    return parse_count(v, field);
  ASSIGN_OR_RETURN(uint64_t n, parse_size(v, field));
  if (n > kMaxTokenBucketValue) return fail(field, "'" + std::string(v) + "' is too large");
  return n;
}

}  // namespace

Result<RngConfig> parse_rng_option(std::string_view text) {
  RngConfig c;
  if (text.empty()) return c;
  std::set<std::string, std::less<>> seen;
  std::optional<uint64_t> bandwidth, ops, burst;
  uint64_t refill_ms = 1000;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string_view::npos) comma = text.size();
    std::string_view item = text.substr(pos, comma - pos);
    pos = comma + 1;
    size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0)
      return fail("--rng", "'" + std::string(item) + "' is not key=value (" + kKeys + ")");
    std::string key(item.substr(0, eq));
    std::string_view value = item.substr(eq + 1);
    std::string field = "--rng " + key;
    if (!seen.insert(key).second) return fail(field, "given more than once");
    if (key == "bandwidth") {
      ASSIGN_OR_RETURN(bandwidth, parse_bytes(value, field));
    } else if (key == "ops") {
      ASSIGN_OR_RETURN(ops, parse_count(value, field));
    } else if (key == "refill_time") {
      ASSIGN_OR_RETURN(refill_ms, parse_count(value, field));
    } else if (key == "one_time_burst") {
      ASSIGN_OR_RETURN(burst, parse_bytes(value, field));
    } else {
      return fail(field, std::string("unknown key (") + kKeys + ")");
    }
    if (comma == text.size()) break;
  }
  if (burst && !bandwidth)
    return fail("--rng one_time_burst", "needs bandwidth= (the burst is extra bytes)");
  if (seen.contains("refill_time") && !bandwidth && !ops)
    return fail("--rng refill_time", "needs bandwidth= or ops= (the buckets it refills)");
  if (bandwidth)
    c.rate_limiter.bandwidth = TokenBucketConfig{*bandwidth, burst.value_or(0), refill_ms};
  if (ops) c.rate_limiter.ops = TokenBucketConfig{*ops, 0, refill_ms};
  if (auto ok = check_rng_config(c, ""); !ok) return fail("--rng", ok.error().message());
  return c;
}

}  // namespace tern
