// named_counter(): one named counter of a DeviceCounters, for tests (a missing name fails the test).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "stats/device_counters.h"

namespace tern::testing {

/// The value of counter `name` in `c.counters`; adds a test failure and returns 0 if absent.
inline uint64_t named_counter(const DeviceCounters& c, const std::string& name) {
  for (const auto& [n, v] : c.counters)
    if (n == name) return v;
  ADD_FAILURE() << "no counter " << name;
  return 0;
}

}  // namespace tern::testing
