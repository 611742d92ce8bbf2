// Field readers shared by the code that reads stats JSON back (tables, rates, Prometheus text).
#pragma once

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>

namespace tern::stats_json {

/// A non-negative integer field of `j` (signed in a snapshot built in-process, unsigned once
/// parsed); 0 when absent, negative or not an integer.
inline uint64_t u64(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) return 0;
  if (it->is_number_unsigned()) return it->get<uint64_t>();
  if (it->is_number_integer())
    return static_cast<uint64_t>(std::max<int64_t>(it->get<int64_t>(), 0));
  return 0;
}

}  // namespace tern::stats_json
