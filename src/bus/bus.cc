#include "bus/bus.h"

#include <cstring>

#include "base/checked.h"
#include "base/clock.h"

namespace tern {

Result<void> Bus::insert(std::shared_ptr<BusDevice> dev, uint64_t base, uint64_t len) {
  auto end = checked_add(base, len);
  if (len == 0 || !end) return fail(kind_ + " bus", "invalid range for " + std::string(dev->name()));
  auto next = ranges_.lower_bound(base);
  if (next != ranges_.end() && next->first < *end)
    return fail(kind_ + " bus", std::string(dev->name()) + " overlaps " +
                                    std::string(next->second.dev->name()));
  if (next != ranges_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second.len > base)
      return fail(kind_ + " bus", std::string(dev->name()) + " overlaps " +
                                      std::string(prev->second.dev->name()));
  }
  ranges_.emplace(base, Range{len, std::move(dev), std::make_unique<DeviceAccessCounters>()});
  return {};
}

Bus::Lookup Bus::find(uint64_t addr) const {
  auto it = ranges_.upper_bound(addr);
  if (it == ranges_.begin()) return {};
  --it;
  if (addr - it->first >= it->second.len) return {};
  return {it->second.dev.get(), it->first, it->second.counters.get()};
}

BusDevice* Bus::read(uint64_t addr, std::span<uint8_t> data) {
  Lookup l = find(addr);
  if (l.device == nullptr) {
    std::memset(data.data(), 0xff, data.size());
    unclaimed_reads_.fetch_add(1, std::memory_order_relaxed);
    unclaimed_.record_read(addr);
    TERN_LOG_RATELIMITED(log_limit_, debug, "unclaimed {} read at {:#x} ({} bytes)", kind_, addr,
                         data.size());
    return nullptr;
  }
  const uint64_t t0 = monotonic_ns();
  l.device->read(addr - l.base, data);
  l.counters->time_ns.fetch_add(monotonic_ns() - t0, std::memory_order_relaxed);
  l.counters->reads.fetch_add(1, std::memory_order_relaxed);
  return l.device;
}

BusDevice* Bus::write(uint64_t addr, std::span<const uint8_t> data) {
  Lookup l = find(addr);
  if (l.device == nullptr) {
    unclaimed_writes_.fetch_add(1, std::memory_order_relaxed);
    unclaimed_.record_write(addr);
    TERN_LOG_RATELIMITED(log_limit_, debug, "unclaimed {} write at {:#x} ({} bytes)", kind_, addr,
                         data.size());
    return nullptr;
  }
  const uint64_t t0 = monotonic_ns();
  l.device->write(addr - l.base, data);
  l.counters->time_ns.fetch_add(monotonic_ns() - t0, std::memory_order_relaxed);
  l.counters->writes.fetch_add(1, std::memory_order_relaxed);
  return l.device;
}

std::vector<Bus::RangeStats> Bus::range_stats() const {
  std::vector<RangeStats> out;
  out.reserve(ranges_.size());
  for (const auto& [base, r] : ranges_) {
    out.push_back({std::string(r.dev->name()), base, r.len,
                   r.counters->reads.load(std::memory_order_relaxed),
                   r.counters->writes.load(std::memory_order_relaxed),
                   r.counters->time_ns.load(std::memory_order_relaxed)});
  }
  return out;
}

}  // namespace tern
