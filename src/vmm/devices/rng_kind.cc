// RngKind (device_kinds.h): virtio-rng in the device registry.
#include "config/rng_spec.h"
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

}  // namespace

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
