// Guest memory for the NVMe unit tests: a few regions over one host buffer, laid out so tests can
// reach pages in two guest-discontiguous regions that are adjacent in host memory, a pair of
// half-page regions a page straddles, and addresses outside guest RAM.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "memory/guest_memory.h"

namespace tern::nvme::testing {

class NvmeTestMemory {
 public:
  static constexpr uint64_t kPage = 4096;
  static constexpr uint64_t kAPages = 16, kBPages = 24;
  static constexpr uint64_t kA = 0x10000;    ///< Region A: kAPages pages.
  static constexpr uint64_t kB = 0x100000;   ///< Region B: kBPages pages, host right after A.
  static constexpr uint64_t kC = 0x400000;   ///< Regions C and D: half a page each, guest-
  static constexpr uint64_t kD = kC + 2048;  ///< adjacent but separate regions.
  static constexpr uint64_t kOutside = 0x800000;  ///< Not guest RAM.

  NvmeTestMemory()
      : buf_((kAPages + kBPages) * kPage + 2 * kPage),
        mem_(GuestMemory::wrap({
            MemoryRegion{kA, kAPages * kPage, buf_.data(), 0},
            MemoryRegion{kB, kBPages * kPage, buf_.data() + kAPages * kPage, 0},
            MemoryRegion{kC, 2048, buf_.data() + (kAPages + kBPages) * kPage, 0},
            MemoryRegion{kD, 2048, buf_.data() + (kAPages + kBPages + 1) * kPage, 0},
        })) {}

  [[nodiscard]] const GuestMemory& mem() const { return mem_; }
  /// Guest-physical address of page `i` of region A / B.
  static constexpr uint64_t a(uint64_t i) { return kA + i * kPage; }
  static constexpr uint64_t b(uint64_t i) { return kB + i * kPage; }
  /// Host address of guest-physical `gpa` (must be RAM).
  [[nodiscard]] uint8_t* host(uint64_t gpa) const { return mem_.slice(gpa, 1)->data(); }

  void put_u64(uint64_t gpa, uint64_t v) const { (void)mem_.write_obj(gpa, v); }
  /// Writes PRP list entries starting at `gpa`.
  void put_list(uint64_t gpa, const std::vector<uint64_t>& entries) const {
    for (size_t i = 0; i < entries.size(); ++i) put_u64(gpa + 8 * i, entries[i]);
  }
  template <class T>
  void put(uint64_t gpa, const T& v) const {
    (void)mem_.write_obj(gpa, v);
  }

 private:
  std::vector<uint8_t> buf_;
  GuestMemory mem_;
};

}  // namespace tern::nvme::testing
