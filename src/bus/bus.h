// Bus: maps PIO or MMIO ranges to BusDevices and dispatches guest accesses.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/log.h"
#include "base/result.h"
#include "bus/access_counters.h"
#include "bus/bus_device.h"
#include "bus/unclaimed_table.h"

namespace tern {

/// A set of non-overlapping [base, base+len) ranges, each claimed by one device.
///
/// Ranges are inserted while the VM is being built (single thread); after that the map is
/// read-only and read()/write() may be called from any thread. Unclaimed reads return all-ones;
/// unclaimed writes are dropped. Both are counted and logged at a limited rate.
///
/// Accounting: every claimed access bumps its range's DeviceAccessCounters (reads, writes, ns
/// inside the device); every unclaimed one bumps an UnclaimedTable row for its port/address.
class Bus {
 public:
  /// `kind` is "pio" or "mmio", used in messages.
  explicit Bus(std::string kind) : kind_(std::move(kind)) {}

  /// Claims [base, base+len) for `dev`. Fails if len is 0, the range overflows or overlaps.
  [[nodiscard]] Result<void> insert(std::shared_ptr<BusDevice> dev, uint64_t base, uint64_t len);

  /// The range containing `addr` if any: the device and the range base.
  struct Lookup {
    BusDevice* device = nullptr;
    uint64_t base = 0;
    DeviceAccessCounters* counters = nullptr;  ///< the range's counters (null when unclaimed)
  };
  [[nodiscard]] Lookup find(uint64_t addr) const;

  /// Dispatches a read of data.size() bytes at `addr`. Returns the device that claimed it, or
  /// nullptr (data filled with 0xFF) when unclaimed.
  BusDevice* read(uint64_t addr, std::span<uint8_t> data);
  /// Dispatches a write. Returns the claiming device, or nullptr when unclaimed (data dropped).
  BusDevice* write(uint64_t addr, std::span<const uint8_t> data);

  [[nodiscard]] uint64_t unclaimed_reads() const { return unclaimed_reads_.load(); }
  [[nodiscard]] uint64_t unclaimed_writes() const { return unclaimed_writes_.load(); }

  /// "pio" or "mmio".
  [[nodiscard]] const std::string& kind() const { return kind_; }
  /// One range's accounting (see DeviceAccessCounters).
  struct RangeStats {
    std::string device;
    uint64_t base = 0;
    uint64_t len = 0;
    uint64_t reads = 0;
    uint64_t writes = 0;
    uint64_t time_ns = 0;
  };
  /// Accounting of every range, by base. Any thread (the map is read-only once the VM runs).
  [[nodiscard]] std::vector<RangeStats> range_stats() const;
  /// Unclaimed accesses per port/address.
  [[nodiscard]] const UnclaimedTable& unclaimed() const { return unclaimed_; }

 private:
  struct Range {
    uint64_t len;
    std::shared_ptr<BusDevice> dev;
    std::unique_ptr<DeviceAccessCounters> counters;
  };
  std::string kind_;
  std::map<uint64_t, Range> ranges_;  // keyed by base
  std::atomic<uint64_t> unclaimed_reads_{0};
  std::atomic<uint64_t> unclaimed_writes_{0};
  UnclaimedTable unclaimed_;
  RateLimit log_limit_{5};
};

}  // namespace tern
