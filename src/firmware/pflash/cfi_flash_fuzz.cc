// libFuzzer target: the CFI flash command state machine (OVMF's variable store), driven by a
// sequence of guest accesses (offset, width, value, read/write), resets and snapshot restores.
// Each op is one byte (bit 0: write; bits 1-2: width 1/2/4/8; bits 3-7 == 31: reset/restore)
// followed by a 16-bit offset (in and just past the 16 KiB array) and the value's bytes.
//
// Checked after every op: the mode is a Mode value; only bytes inside the reported changed range
// ever change; a program stores exactly the written bytes; an erase leaves its whole block 0xFF;
// reads in read-array mode return the array (0xFF past its end) and in status mode the status
// register in every lane; the status is 0 (after a clear) or has SR.7 (ready) set.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "base/testing/fuzz_input.h"
#include "firmware/pflash/cfi_flash.h"

namespace {

using tern::CfiFlash;
using tern::testing::FuzzInput;

constexpr uint32_t kBlock = 4096;
constexpr uint64_t kSize = 4 * kBlock;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tern::testing::quiet_logs();
  FuzzInput in(data, size);
  std::vector<uint8_t> mem(kSize);
  for (uint64_t i = 0; i < kSize; ++i) mem[i] = static_cast<uint8_t>(i * 31 + 7);
  CfiFlash flash(mem, kBlock);
  std::vector<uint8_t> before = mem;
  bool any_status = false;  // a restore may set any status; until then it is 0 or has READY
  for (int ops = 0; ops < 4096 && !in.empty(); ++ops) {
    const uint8_t op = in.u8();
    const size_t width = size_t{1} << ((op >> 1) & 3);
    const uint64_t offset = in.u16() % (kSize + 64);
    uint8_t buf[8] = {};
    for (size_t i = 0; i < width; ++i) buf[i] = in.u8();
    const CfiFlash::Mode mode_before = flash.mode();
    const auto counters_before = flash.counters();

    if ((op >> 3) == 31) {
      if (op & 1) {
        flash.reset();
        FUZZ_CHECK(flash.read_array() && flash.status() == tern::kCfiStatusReady);
      } else {
        bool ok = flash.restore(buf[0], buf[1], offset);
        FUZZ_CHECK(ok == (buf[0] < CfiFlash::kModeCount && offset < kSize));
        if (ok) any_status = true;
      }
    } else if (op & 1) {
      flash.write(offset, std::span<const uint8_t>(buf, width));
      const auto& c = flash.counters();
      if (c.programs != counters_before.programs) {
        FUZZ_CHECK(mode_before == CfiFlash::Mode::kProgram);
        FUZZ_CHECK(std::equal(buf, buf + width, mem.begin() + static_cast<ptrdiff_t>(offset)));
      }
      if (c.erases != counters_before.erases) {
        uint64_t start = flash.erase_offset() & ~uint64_t{kBlock - 1};
        FUZZ_CHECK(std::all_of(mem.begin() + static_cast<ptrdiff_t>(start),
                               mem.begin() + static_cast<ptrdiff_t>(start + kBlock),
                               [](uint8_t b) { return b == 0xFF; }));
      }
    } else {
      uint8_t out[8];
      flash.read(offset, std::span<uint8_t>(out, width));
      for (size_t i = 0; i < width; ++i) {
        if (flash.read_array())
          FUZZ_CHECK(out[i] == (offset + i < kSize ? mem[offset + i] : 0xFF));
        else if (flash.mode() == CfiFlash::Mode::kReadStatus)
          FUZZ_CHECK(out[i] == flash.status());
      }
      FUZZ_CHECK(flash.mode() == mode_before);  // reads never change the mode
    }
    FUZZ_CHECK(static_cast<uint8_t>(flash.mode()) < CfiFlash::kModeCount);
    // Only 0x50 clears bits (all of them); everything else ORs READY in with its error bits.
    if (!any_status)
      FUZZ_CHECK(flash.status() == 0 || (flash.status() & tern::kCfiStatusReady) != 0);
    auto changed = flash.take_changed();
    if (std::memcmp(mem.data(), before.data(), kSize) == 0) continue;
    for (uint64_t i = 0; i < kSize; ++i) {
      if (mem[i] == before[i]) continue;
      FUZZ_CHECK(changed && i >= changed->first && i <= changed->second);
    }
    before = mem;
  }
  return 0;
}
