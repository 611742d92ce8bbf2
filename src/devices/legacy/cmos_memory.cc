#include "devices/legacy/cmos_memory.h"

#include <algorithm>
#include <map>

namespace tern {

namespace {
constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;
constexpr uint64_t kBaseMemoryKiB = 640;
constexpr uint64_t k16BitMax = 0xFFFF;

// CMOS RAM indices (IBM PC/AT BIOS convention; names as SeaBIOS's hw/rtc.h).
constexpr uint8_t kMemBaseLow = 0x15;
constexpr uint8_t kMemBaseHigh = 0x16;
constexpr uint8_t kMemExtLow = 0x17;
constexpr uint8_t kMemExtHigh = 0x18;
constexpr uint8_t kChecksumHigh = 0x2E;
constexpr uint8_t kChecksumLow = 0x2F;
constexpr uint8_t kMemExt2Low = 0x30;  // "actual extended memory" (POST-detected)
constexpr uint8_t kMemExt2High = 0x31;
constexpr uint8_t kMemAbove16mLow = 0x34;  // 64 KiB units
constexpr uint8_t kMemAbove16mHigh = 0x35;
constexpr uint8_t kMemAbove4gLow = 0x5B;  // 64 KiB units, 3 bytes
constexpr uint8_t kMemAbove4gMid = 0x5C;
constexpr uint8_t kMemAbove4gHigh = 0x5D;
constexpr uint8_t kCpuCountMinusOne = 0x5F;
constexpr uint8_t kChecksumFirst = 0x10;
constexpr uint8_t kChecksumLast = 0x2D;

uint8_t lo(uint64_t v) {
  return static_cast<uint8_t>(v);
}
uint8_t hi(uint64_t v) {
  return static_cast<uint8_t>(v >> 8);
}
}  // namespace

std::vector<std::pair<uint8_t, uint8_t>> cmos_memory_bytes(const CmosMemoryLayout& layout,
                                                           const CmosRtc& cmos) {
  std::map<uint8_t, uint8_t> b;
  const uint64_t below = layout.below_4g;
  const uint64_t base_kib = std::min(below / kKiB, kBaseMemoryKiB);
  b[kMemBaseLow] = lo(base_kib);
  b[kMemBaseHigh] = hi(base_kib);
  const uint64_t ext_kib = below > kMiB ? std::min((below - kMiB) / kKiB, k16BitMax) : 0;
  b[kMemExtLow] = b[kMemExt2Low] = lo(ext_kib);
  b[kMemExtHigh] = b[kMemExt2High] = hi(ext_kib);
  const uint64_t above16m =
      below > 16 * kMiB ? std::min((below - 16 * kMiB) / (64 * kKiB), k16BitMax) : 0;
  b[kMemAbove16mLow] = lo(above16m);
  b[kMemAbove16mHigh] = hi(above16m);
  const uint64_t above4g = std::min<uint64_t>(layout.above_4g / (64 * kKiB), 0xFFFFFF);
  b[kMemAbove4gLow] = lo(above4g);
  b[kMemAbove4gMid] = hi(above4g);
  b[kMemAbove4gHigh] = static_cast<uint8_t>(above4g >> 16);
  const unsigned cpus = std::clamp(layout.cpus, 1u, 256u);
  b[kCpuCountMinusOne] = static_cast<uint8_t>(cpus - 1);

  uint16_t sum = 0;
  for (unsigned i = kChecksumFirst; i <= kChecksumLast; ++i) {
    const auto it = b.find(static_cast<uint8_t>(i));
    sum = static_cast<uint16_t>(sum +
                                (it != b.end() ? it->second : cmos.ram(static_cast<uint8_t>(i))));
  }
  b[kChecksumHigh] = hi(sum);
  b[kChecksumLow] = lo(sum);
  return {b.begin(), b.end()};
}

void set_cmos_memory(CmosRtc& cmos, const CmosMemoryLayout& layout) {
  for (const auto& [index, value] : cmos_memory_bytes(layout, cmos)) cmos.set_ram(index, value);
}

}  // namespace tern
