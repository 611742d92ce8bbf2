// Test helpers (unit tests only) for the API request parser's tests: a readable stand-in file and
// the fault message of a rejected request.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "api/api_parser.h"

namespace tern::testing {

/// A file that exists and is readable, standing in for kernel/initrd/disk paths.
inline const std::string kReadableFile = "/proc/self/exe";

/// The "fault_message" of a request parse_request() refused (expects a 400; empty if it was accepted).
inline std::string parse_fault(const tl::expected<ApiRequest, ApiResponse>& r) {
  EXPECT_FALSE(r.has_value());
  if (r) return {};
  EXPECT_EQ(r.error().status, 400);
  return nlohmann::json::parse(r.error().body).at("fault_message").get<std::string>();
}

}  // namespace tern::testing
