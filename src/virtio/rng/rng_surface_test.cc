// The virtio-rng kind's user surface (src/vmm/devices/rng_kind.cc): PUT /entropy through the
// API parser's generic device route, and the GET /vm/config rendering.
#include <gtest/gtest.h>

#include <any>
#include <nlohmann/json.hpp>

#include "api/api_parser.h"
#include "vmm/devices/device_kinds.h"

namespace tern {
namespace {

std::string fault(const tl::expected<ApiRequest, ApiResponse>& r) {
  if (r) return "(parsed)";
  return nlohmann::json::parse(r.error().body).at("fault_message");
}

// PUT /entropy: Firecracker's EntropyDevice body.
TEST(RngSurface, EntropyBody) {
  auto r = parse_api_request(
      "PUT", "/entropy",
      R"({"rate_limiter": {"bandwidth": {"size": 1048576, "one_time_burst": 4096, "refill_time": 1000}, "ops": {"size": 100, "refill_time": 500}}})");
  ASSERT_TRUE(r) << r.error().body;
  const RngConfig& c = std::any_cast<const RngConfig&>(std::get<api::PutDevice>(*r).spec);
  EXPECT_EQ(c.rate_limiter.bandwidth, (TokenBucketConfig{1048576, 4096, 1000}));
  EXPECT_EQ(c.rate_limiter.ops, (TokenBucketConfig{100, 0, 500}));
  auto none = parse_api_request("PUT", "/entropy", "{}");
  ASSERT_TRUE(none);
  EXPECT_FALSE(std::any_cast<const RngConfig&>(std::get<api::PutDevice>(*none).spec).rate_limiter.bandwidth);
  EXPECT_EQ(fault(parse_api_request("PUT", "/entropy", R"({"rate": 1})")), "rate: unknown field");
  EXPECT_EQ(fault(parse_api_request("PUT", "/entropy", R"({"rate_limiter": {"bandwidth": {"size": 1, "refill_time": 1, "burst": 2}}})")),
            "rate_limiter.bandwidth.burst: unknown field");
  EXPECT_EQ(fault(parse_api_request("PUT", "/entropy", R"({"rate_limiter": {"ops": {"size": 1}}})")),
            "rate_limiter.ops.refill_time: missing required field");
  EXPECT_EQ(fault(parse_api_request("PUT", "/entropy", R"({"rate_limiter": {"ops": {"size": 0, "refill_time": 1}}})")),
            "rate_limiter.ops.size: must be greater than 0");
  EXPECT_EQ(fault(parse_api_request("PUT", "/entropy", "")),
            "body: missing: this request needs a JSON body");
  auto j = RngKind::to_json(c);
  EXPECT_EQ(j["rate_limiter"]["ops"]["refill_time"], 500);
  EXPECT_EQ(RngKind::to_json(RngConfig{}), nlohmann::json({{"rate_limiter", nullptr}}));
}

}  // namespace
}  // namespace tern
