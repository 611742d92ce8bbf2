// Unit tests: --rng values parse into Firecracker's rate limiter; errors name the field.
#include "virtio/rng/rng_option.h"

#include <gtest/gtest.h>

namespace tern {
namespace {

std::string error_of(std::string_view text) {
  auto r = parse_rng_option(text);
  return r ? "" : r.error().message();
}

TEST(RngOption, AloneIsUnlimited) {
  auto r = parse_rng_option("");
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->rate_limiter.bandwidth);
  EXPECT_FALSE(r->rate_limiter.ops);
}

TEST(RngOption, FirecrackerFields) {
  auto r = parse_rng_option("bandwidth=1M,ops=100,refill_time=250,one_time_burst=4096");
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->rate_limiter.bandwidth, (TokenBucketConfig{1 << 20, 4096, 250}));
  EXPECT_EQ(r->rate_limiter.ops, (TokenBucketConfig{100, 0, 250}));
  auto bytes = parse_rng_option("bandwidth=65536");
  ASSERT_TRUE(bytes);
  EXPECT_EQ(bytes->rate_limiter.bandwidth, (TokenBucketConfig{65536, 0, 1000}));  // bare: bytes
}

TEST(RngOption, ErrorsNameTheField) {
  EXPECT_EQ(error_of("bandwidth=fast").rfind("--rng bandwidth", 0), 0u)
      << error_of("bandwidth=fast");
  EXPECT_EQ(error_of("ops=0"), "--rng ops: must be greater than 0");
  EXPECT_EQ(error_of("refill_time=x,ops=1"), "--rng refill_time: 'x' is not a number");
  EXPECT_EQ(error_of("speed=1").rfind("--rng speed: unknown key", 0), 0u);
  EXPECT_EQ(error_of("ops=1,ops=2"), "--rng ops: given more than once");
  EXPECT_EQ(error_of("one_time_burst=1M").rfind("--rng one_time_burst: needs bandwidth", 0), 0u);
  EXPECT_EQ(error_of("refill_time=10").rfind("--rng refill_time: needs", 0), 0u);
  EXPECT_EQ(error_of("bandwidth").rfind("--rng: 'bandwidth' is not key=value", 0), 0u);
  EXPECT_EQ(error_of("ops=99999999999999999999").rfind("--rng ops", 0), 0u);
}

}  // namespace
}  // namespace tern
