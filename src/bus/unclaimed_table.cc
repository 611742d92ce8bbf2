#include "bus/unclaimed_table.h"

#include <algorithm>

namespace tern {

UnclaimedTable::Counters& UnclaimedTable::counters_for(uint64_t addr) {
  const uint64_t key = addr + 1;  // addresses are < 2^52 (MMIO) or < 2^16 (PIO): never wraps to 0
  size_t start = static_cast<size_t>((addr ^ (addr >> 7)) % kSlots);
  for (size_t i = 0; i < kSlots; ++i) {
    Slot& s = slots_[(start + i) % kSlots];
    uint64_t k = s.key.load(std::memory_order_relaxed);
    if (k == key) return s.c;
    if (k == 0) {
      uint64_t expected = 0;
      if (s.key.compare_exchange_strong(expected, key, std::memory_order_relaxed)) return s.c;
      if (expected == key) return s.c;  // another vCPU claimed it for the same address
    }
  }
  return other_;
}

UnclaimedTable::Snapshot UnclaimedTable::snapshot() const {
  Snapshot out;
  for (const Slot& s : slots_) {
    uint64_t k = s.key.load(std::memory_order_relaxed);
    if (k == 0) continue;
    out.rows.push_back({k - 1, s.c.reads.load(std::memory_order_relaxed),
                        s.c.writes.load(std::memory_order_relaxed)});
  }
  std::sort(out.rows.begin(), out.rows.end(), [](const Row& a, const Row& b) {
    uint64_t ta = a.reads + a.writes, tb = b.reads + b.writes;
    return ta != tb ? ta > tb : a.addr < b.addr;
  });
  out.other.reads = other_.reads.load(std::memory_order_relaxed);
  out.other.writes = other_.writes.load(std::memory_order_relaxed);
  return out;
}

}  // namespace tern
