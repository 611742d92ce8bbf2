// monotonic_ns(): CLOCK_MONOTONIC in ns, the time base of every tern latency and rate.
#pragma once

#include <time.h>

#include <cstdint>

namespace tern {

/// CLOCK_MONOTONIC in ns (a vDSO call: no syscall, tens of ns).
inline uint64_t monotonic_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace tern
