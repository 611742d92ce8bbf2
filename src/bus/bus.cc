#include "bus/bus.h"

#include <cstring>

#include "base/checked.h"

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
  ranges_.emplace(base, Range{len, std::move(dev)});
  return {};
}

Bus::Lookup Bus::find(uint64_t addr) const {
  auto it = ranges_.upper_bound(addr);
  if (it == ranges_.begin()) return {};
  --it;
  if (addr - it->first >= it->second.len) return {};
  return {it->second.dev.get(), it->first};
}

BusDevice* Bus::read(uint64_t addr, std::span<uint8_t> data) {
  Lookup l = find(addr);
  if (l.device == nullptr) {
    std::memset(data.data(), 0xff, data.size());
    unclaimed_reads_.fetch_add(1, std::memory_order_relaxed);
    TERN_LOG_RATELIMITED(log_limit_, debug, "unclaimed {} read at {:#x} ({} bytes)", kind_, addr,
                         data.size());
    return nullptr;
  }
  l.device->read(addr - l.base, data);
  return l.device;
}

BusDevice* Bus::write(uint64_t addr, std::span<const uint8_t> data) {
  Lookup l = find(addr);
  if (l.device == nullptr) {
    unclaimed_writes_.fetch_add(1, std::memory_order_relaxed);
    TERN_LOG_RATELIMITED(log_limit_, debug, "unclaimed {} write at {:#x} ({} bytes)", kind_, addr,
                         data.size());
    return nullptr;
  }
  l.device->write(addr - l.base, data);
  return l.device;
}

}  // namespace tern
