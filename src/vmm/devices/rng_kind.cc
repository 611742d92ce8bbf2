// RngKind (device_kinds.h): virtio-rng in the device registry.
#include <nlohmann/json.hpp>

#include "api/json_reader.h"
#include "virtio/rng/rng_option.h"
#include "virtio/rng/rng_spec.h"
#include "virtio/rng/virtio_rng.h"
#include "vmm/devices/device_kinds.h"

namespace tern {

Result<std::shared_ptr<VirtioDevice>> RngKind::make(const Spec& s, const std::string& name) {
  return make_virtio_rng(s, name);
}

namespace {

void encode_bucket(snap::ByteWriter& w, const std::optional<TokenBucketConfig>& b) {
  w.boolean(b.has_value());
  if (!b) return;
  w.u64(b->size);
  w.u64(b->one_time_burst);
  w.u64(b->refill_time_ms);
}

Result<std::optional<TokenBucketConfig>> decode_bucket(snap::ByteReader& r) {
  ASSIGN_OR_RETURN(bool present, r.boolean());
  if (!present) return std::optional<TokenBucketConfig>();
  TokenBucketConfig b;
  ASSIGN_OR_RETURN(b.size, r.u64());
  ASSIGN_OR_RETURN(b.one_time_burst, r.u64());
  ASSIGN_OR_RETURN(b.refill_time_ms, r.u64());
  return std::optional(b);
}

Result<std::optional<TokenBucketConfig>> parse_token_bucket(JsonReader& parent,
                                                            const std::string& name) {
  const nlohmann::json* j = parent.raw(name);
  if (!j) return std::optional<TokenBucketConfig>();
  ASSIGN_OR_RETURN(JsonReader r, JsonReader::open(*j, parent.field(name)));
  TokenBucketConfig b;
  ASSIGN_OR_RETURN(auto size, r.optional_uint("size", 0, UINT64_MAX));
  if (!size) return fail(r.field("size"), "missing required field");
  b.size = *size;
  ASSIGN_OR_RETURN(auto burst, r.optional_uint("one_time_burst", 0, UINT64_MAX));
  b.one_time_burst = burst.value_or(0);
  ASSIGN_OR_RETURN(auto refill, r.optional_uint("refill_time", 0, UINT64_MAX));
  if (!refill) return fail(r.field("refill_time"), "missing required field");
  b.refill_time_ms = *refill;
  TRY(r.finish());
  return std::optional(b);
}

nlohmann::json bucket_json(const TokenBucketConfig& b) {
  return {{"size", b.size}, {"one_time_burst", b.one_time_burst}, {"refill_time", b.refill_time_ms}};
}

}  // namespace

Result<RngKind::Spec> RngKind::from_json(const nlohmann::json& j, const std::string& where) {
  ASSIGN_OR_RETURN(JsonReader r, JsonReader::open(j, where));
  RngConfig c;
  if (const nlohmann::json* rl = r.raw("rate_limiter")) {
    ASSIGN_OR_RETURN(JsonReader l, JsonReader::open(*rl, r.field("rate_limiter")));
    ASSIGN_OR_RETURN(c.rate_limiter.bandwidth, parse_token_bucket(l, "bandwidth"));
    ASSIGN_OR_RETURN(c.rate_limiter.ops, parse_token_bucket(l, "ops"));
    TRY(l.finish());
  }
  TRY(r.finish());
  TRY(check_rng_config(c, where));
  return c;
}

nlohmann::json RngKind::to_json(const Spec& c) {
  const RateLimiterConfig& rl = c.rate_limiter;
  if (!rl.bandwidth && !rl.ops) return {{"rate_limiter", nullptr}};
  nlohmann::json l = nlohmann::json::object();
  if (rl.bandwidth) l["bandwidth"] = bucket_json(*rl.bandwidth);
  if (rl.ops) l["ops"] = bucket_json(*rl.ops);
  return {{"rate_limiter", l}};
}

Result<RngKind::Spec> RngKind::from_cli(std::string_view spec) { return parse_rng_option(spec); }

void RngKind::encode(snap::ByteWriter& w, const Spec& s) {
  encode_bucket(w, s.rate_limiter.bandwidth);
  encode_bucket(w, s.rate_limiter.ops);
}

Result<RngKind::Spec> RngKind::decode(snap::ByteReader& r) {
  Spec s;
  ASSIGN_OR_RETURN(s.rate_limiter.bandwidth, decode_bucket(r));
  ASSIGN_OR_RETURN(s.rate_limiter.ops, decode_bucket(r));
  if (auto ok = check_rng_config(s, "entropy"); !ok) return fail(r.what(), ok.error().message());
  return s;
}

}  // namespace tern
