#include "base/latency_histogram.h"

#include <gtest/gtest.h>

namespace tern {
namespace {

TEST(LatencyHistogram, BucketBoundsAreInclusivePowersOfTwo) {
  EXPECT_EQ(LatencyHistogram::bucket_of(0), 0u);
  EXPECT_EQ(LatencyHistogram::bucket_of(1), 0u);
  EXPECT_EQ(LatencyHistogram::bucket_of(2), 1u);
  EXPECT_EQ(LatencyHistogram::bucket_of(3), 2u);
  EXPECT_EQ(LatencyHistogram::bucket_of(4), 2u);
  EXPECT_EQ(LatencyHistogram::bucket_of(5), 3u);
  EXPECT_EQ(LatencyHistogram::bucket_of(1024), 10u);
  EXPECT_EQ(LatencyHistogram::bucket_of(1025), 11u);
  EXPECT_EQ(LatencyHistogram::bucket_of(uint64_t{1} << 32), 32u);
  EXPECT_EQ(LatencyHistogram::bucket_of((uint64_t{1} << 32) + 1), LatencyHistogram::kFinite);
  EXPECT_EQ(LatencyHistogram::bucket_of(~uint64_t{0}), LatencyHistogram::kFinite);
  EXPECT_EQ(LatencyHistogram::bucket_le(10), 1024u);
}

TEST(LatencyHistogram, RecordsCountSumMinMaxAndBuckets) {
  LatencyHistogram h;
  EXPECT_EQ(h.snapshot().min_ns, 0u);
  for (uint64_t v : {700u, 1500u, 1500u, 90000u}) h.record(v);
  auto s = h.snapshot();
  EXPECT_EQ(s.count, 4u);
  EXPECT_EQ(s.sum_ns, 93700u);
  EXPECT_EQ(s.min_ns, 700u);
  EXPECT_EQ(s.max_ns, 90000u);
  EXPECT_EQ(s.buckets[10], 1u);  // 700 <= 1024
  EXPECT_EQ(s.buckets[11], 2u);  // 1500 <= 2048
  EXPECT_EQ(s.buckets[17], 1u);  // 90000 <= 131072
  uint64_t n = 0;
  for (uint64_t b : s.buckets) n += b;
  EXPECT_EQ(n, 4u);
}

}  // namespace
}  // namespace tern
