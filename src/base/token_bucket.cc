#include "base/token_bucket.h"

#include <algorithm>

#include "base/result.h"

namespace tern {

namespace {
// a + b, saturating at 2^64 - 1 (a one_time_burst near 2^64 plus the bucket's tokens).
uint64_t sat_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }
}  // namespace

TokenBucket::TokenBucket(uint64_t size, uint64_t one_time_burst, uint64_t refill_ns,
                         uint64_t now_ns)
    : size_(size), burst_(one_time_burst), refill_ns_(refill_ns), tokens_(size), last_ns_(now_ns) {
  TERN_CHECK(size > 0 && refill_ns > 0);
}

void TokenBucket::refill(uint64_t now_ns) {
  if (now_ns <= last_ns_) return;  // a clock that did not move (or moved back) adds nothing
  uint64_t elapsed = now_ns - last_ns_;
  last_ns_ = now_ns;
  if (tokens_ >= size_) {
    remainder_ = 0;
    return;
  }
  if (elapsed >= refill_ns_) {
    tokens_ = size_;
    remainder_ = 0;
    return;
  }
  // tokens = size * elapsed / refill_ns, in 128 bits so large sizes cannot overflow.
  unsigned __int128 num = static_cast<unsigned __int128>(size_) * elapsed + remainder_;
  auto add = static_cast<uint64_t>(num / refill_ns_);
  remainder_ = static_cast<uint64_t>(num % refill_ns_);
  tokens_ += std::min(add, size_ - tokens_);  // capped at size_ without wrapping (size_ ~ 2^64)
  if (tokens_ == size_) remainder_ = 0;
}

uint64_t TokenBucket::available(uint64_t now_ns) {
  refill(now_ns);
  return sat_add(burst_, tokens_);
}

uint64_t TokenBucket::take(uint64_t n, uint64_t now_ns) {
  refill(now_ns);
  uint64_t from_burst = std::min(n, burst_);
  burst_ -= from_burst;
  uint64_t from_tokens = std::min(n - from_burst, tokens_);
  tokens_ -= from_tokens;
  return from_burst + from_tokens;
}

uint64_t TokenBucket::ns_until(uint64_t n, uint64_t now_ns) {
  refill(now_ns);
  n = std::min(n, size_);
  if (sat_add(burst_, tokens_) >= n) return 0;
  uint64_t missing = n - burst_ - tokens_;
  // Smallest t with size * t + remainder >= missing * refill_ns.
  unsigned __int128 need = static_cast<unsigned __int128>(missing) * refill_ns_;
  need = need > remainder_ ? need - remainder_ : 0;
  return static_cast<uint64_t>((need + size_ - 1) / size_);
}

}  // namespace tern
