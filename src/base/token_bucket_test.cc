#include "base/token_bucket.h"

#include <gtest/gtest.h>

namespace tern {
namespace {

constexpr uint64_t kMs = 1'000'000;

TEST(TokenBucketTest, StartsFullAndRefillsProportionally) {
  TokenBucket b(100, 0, 1000 * kMs, 0);
  EXPECT_EQ(b.available(0), 100u);
  EXPECT_EQ(b.take(70, 0), 70u);
  EXPECT_EQ(b.take(70, 0), 30u);  // only what is there
  EXPECT_EQ(b.available(0), 0u);
  EXPECT_EQ(b.available(100 * kMs), 10u);
  EXPECT_EQ(b.available(5000 * kMs), 100u);  // capped at size
}

TEST(TokenBucketTest, BurstIsUsedOnceAndFirst) {
  TokenBucket b(10, 50, 1000 * kMs, 0);
  EXPECT_EQ(b.available(0), 60u);
  EXPECT_EQ(b.take(55, 0), 55u);
  EXPECT_EQ(b.available(0), 5u);
  EXPECT_EQ(b.available(10000 * kMs), 10u);  // the burst never comes back
}

TEST(TokenBucketTest, NsUntilMatchesRefill) {
  TokenBucket b(4, 0, 1000 * kMs, 0);
  EXPECT_EQ(b.ns_until(1, 0), 0u);
  b.take(4, 0);
  uint64_t t = b.ns_until(1, 0);
  EXPECT_EQ(t, 250 * kMs);
  EXPECT_EQ(b.available(t - 1), 0u);
  EXPECT_EQ(b.available(t), 1u);
  EXPECT_EQ(b.ns_until(100, t), 750 * kMs);  // clamped to size
}

TEST(TokenBucketTest, FractionalRefillIsNotLost) {
  TokenBucket b(3, 0, 1000 * kMs, 0);
  b.take(3, 0);
  uint64_t got = 0;
  for (uint64_t t = 1; t <= 1000; ++t) got += b.take(1, t * kMs);  // 1 ms steps
  EXPECT_EQ(got, 3u);
}

TEST(TokenBucketTest, ClockGoingBackAddsNothing) {
  TokenBucket b(10, 0, 10 * kMs, 100 * kMs);
  b.take(10, 100 * kMs);
  EXPECT_EQ(b.available(50 * kMs), 0u);
}

// A huge one_time_burst plus the bucket's own tokens must not wrap to a small (or zero) count.
TEST(TokenBucketTest, HugeBurstDoesNotOverflowAvailable) {
  TokenBucket b(10, UINT64_MAX, 1000 * kMs, 0);
  EXPECT_EQ(b.available(0), UINT64_MAX);  // saturates
  EXPECT_EQ(b.ns_until(1, 0), 0u);        // not throttled
  EXPECT_EQ(b.take(UINT64_MAX, 0), UINT64_MAX);
  EXPECT_EQ(b.available(0), 10u);  // what the burst left: the bucket itself
}

// A size near 2^64: the refill's tokens + added must not wrap below size.
TEST(TokenBucketTest, HugeSizeRefillDoesNotWrap) {
  const uint64_t size = UINT64_MAX;
  TokenBucket b(size, 0, 1000 * kMs, 0);
  EXPECT_EQ(b.take(size / 2, 0), size / 2);  // size - size/2 left, more than 2^63
  EXPECT_EQ(b.available(999 * kMs), size);   // refilled nearly a whole period: capped at size
}

}  // namespace
}  // namespace tern
