// UnclaimedTable: bounded per-address counts of guest accesses that no device claimed.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <vector>

namespace tern {

/// Counts unclaimed reads/writes per port or guest-physical address in a fixed table of kSlots
/// addresses; accesses to further addresses are added to an "other" bucket, so a guest sweeping
/// every port cannot grow memory. The first kSlots distinct addresses seen keep their own row
/// (a table that evicted rows could not be updated lock-free). record_*() are lock-free and may
/// run on any number of vCPU threads; snapshot() on any thread.
class UnclaimedTable {
 public:
  static constexpr size_t kSlots = 32;

  void record_read(uint64_t addr) {
    counters_for(addr).reads.fetch_add(1, std::memory_order_relaxed);
  }
  void record_write(uint64_t addr) {
    counters_for(addr).writes.fetch_add(1, std::memory_order_relaxed);
  }

  struct Row {
    uint64_t addr = 0;
    uint64_t reads = 0;
    uint64_t writes = 0;
  };
  struct Snapshot {
    std::vector<Row> rows;  ///< by reads + writes, descending; then by address
    Row other;              ///< addresses without a row of their own (addr unused)
  };
  [[nodiscard]] Snapshot snapshot() const;

 private:
  struct Counters {
    std::atomic<uint64_t> reads{0};
    std::atomic<uint64_t> writes{0};
  };
  struct Slot {
    std::atomic<uint64_t> key{0};  ///< addr + 1; 0 = free
    Counters c;
  };
  Counters& counters_for(uint64_t addr);

  std::array<Slot, kSlots> slots_{};
  Counters other_;
};

}  // namespace tern
