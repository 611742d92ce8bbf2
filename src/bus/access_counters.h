// DeviceAccessCounters: PIO/MMIO accesses to one bus range and the time its device spent on them.
#pragma once

#include <atomic>
#include <cstdint>

namespace tern {

/// Counters of one Bus range, bumped by any vCPU thread (relaxed fetch_add), read by anyone.
struct DeviceAccessCounters {
  std::atomic<uint64_t> reads{0};    ///< guest reads dispatched to the device (count)
  std::atomic<uint64_t> writes{0};   ///< guest writes dispatched to the device (count)
  std::atomic<uint64_t> time_ns{0};  ///< time inside the device's read()/write() (ns)
};

}  // namespace tern
