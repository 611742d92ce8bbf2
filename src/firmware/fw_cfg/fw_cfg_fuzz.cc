// libFuzzer target: the fw_cfg device (ports 0x510..0x51B) serving the items a firmware boot
// gets (build_fw_cfg_items), over a small fake guest memory of two regions with a gap. Each input
// byte picks an operation: select, port reads and writes of any width at any of the 12 ports,
// DMA requests whose descriptor (control bits, key, length, buffer address) and descriptor
// address come from the input — inside RAM, at region edges, in the gap, wrapping — and a
// save/restore into a fresh device.
//
// A model (the spec, written independently of the device) tracks the selector, the offset and the
// DMA address latch, and a shadow copy of guest memory. After every operation: each byte read
// from the ports is what the spec says, and guest memory equals the shadow — so DMA never writes
// outside the buffer it was given, never more than the item, and reports ERROR exactly when the
// request is refused.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "base/testing/fuzz_input.h"
#include "firmware/fw_cfg/fw_cfg_contents.h"
#include "firmware/fw_cfg/testing/fw_cfg_rig.h"

namespace {

using namespace tern;
using namespace tern::fw_cfg;
using tern::testing::FuzzInput;
using Rig = tern::fw_cfg::testing::FwCfgRig;

const FwCfgItems& items() {
  static const FwCfgItems built = [] {
    FwCfgMachine m;
    m.num_vcpus = 2;
    m.ram_bytes = 64 << 20;
    m.boot_order = {{BootDevice::Kind::kVirtioBlk, 3, 0}};
    return *build_fw_cfg_items(m);
  }();
  return built;
}

struct Model {
  uint16_t selector = 0;
  uint64_t offset = 0;
  uint32_t dma_high = 0;
  std::vector<uint8_t> low = std::vector<uint8_t>(Rig::kLowSize);
  std::vector<uint8_t> high = std::vector<uint8_t>(Rig::kHighSize);

  /// The shadow bytes for [gpa, gpa + len) if they lie in one region.
  uint8_t* ram(uint64_t gpa, uint64_t len) {
    if (gpa + len < gpa) return nullptr;
    if (gpa + len <= Rig::kLowSize) return low.data() + gpa;
    if (gpa >= Rig::kHighBase && gpa + len <= Rig::kHighBase + Rig::kHighSize)
      return high.data() + (gpa - Rig::kHighBase);
    return nullptr;
  }
  const std::vector<uint8_t>* item() const { return items().find(selector); }
  uint64_t size() const { return item() ? item()->size() : 0; }
  uint8_t data_byte() {
    if (offset >= size()) return 0;
    return (*item())[offset++];
  }
  void select(uint16_t key) {
    selector = key;
    offset = 0;
  }
  void dma(uint64_t gpa) {
    uint8_t* d = ram(gpa, 16);
    if (!d) return;  // unreachable: nothing happens
    auto be = [](const uint8_t* p, size_t n) {
      uint64_t v = 0;
      for (size_t i = 0; i < n; ++i) v = v << 8 | p[i];
      return v;
    };
    const auto control = static_cast<uint32_t>(be(d, 4));
    const auto length = static_cast<uint32_t>(be(d + 4, 4));
    const uint64_t address = be(d + 8, 8);
    const uint32_t bits = control & 0xFFFF;
    bool ok = (bits & ~0x1Eu) == 0;                   // only READ, SKIP, SELECT, WRITE
    if ((bits & 0x10) && !(bits & 0x02)) ok = false;  // WRITE without READ
    uint8_t* buf = nullptr;
    if (ok && (bits & 0x02) && length != 0) {
      buf = ram(address, length);
      ok = buf != nullptr;
    }
    if (ok) {
      if (bits & 0x08) select(static_cast<uint16_t>(control >> 16));
      const uint64_t left = size() > offset ? size() - offset : 0;
      const uint64_t n = std::min<uint64_t>(length, left);
      if (bits & 0x02) {
        if (n) std::memcpy(buf, item()->data() + offset, n);
        if (length > n) std::memset(buf + n, 0, length - n);
        offset += n;
      } else if (bits & 0x04) {
        offset += n;
      }
    }
    d[0] = d[1] = d[2] = 0;
    d[3] = ok ? 0 : 1;
  }
};

struct Fuzz {
  Rig rig{items()};
  Model model;

  /// Guest memory starts as a pattern, so that a zero fill that should not happen shows.
  Fuzz() {
    std::fill(model.low.begin(), model.low.end(), 0xA5);
    std::fill(model.high.begin(), model.high.end(), 0x5A);
    (void)rig.mem().write(0, model.low);
    (void)rig.mem().write(Rig::kHighBase, model.high);
  }

  void check_memory() {
    FUZZ_CHECK(rig.bytes_at(0, Rig::kLowSize) == model.low);
    FUZZ_CHECK(rig.bytes_at(Rig::kHighBase, Rig::kHighSize) == model.high);
  }

  void read(uint64_t off, size_t width) {
    uint8_t b[8];
    rig.dev().read(off, std::span(b, width));
    for (size_t i = 0; i < width; ++i) {
      const uint64_t at = off + i;
      if (off <= FwCfgDevice::kDataOffset)
        FUZZ_CHECK(b[i] == model.data_byte());
      else if (at >= 4 && at < 12)
        FUZZ_CHECK(b[i] == "QEMU CFG"[at - 4]);
      else
        FUZZ_CHECK(b[i] == 0xFF);
    }
  }

  void write(uint64_t off, std::span<const uint8_t> v) {
    rig.dev().write(off, v);
    auto be = [&v] {
      uint64_t x = 0;
      for (uint8_t c : v) x = x << 8 | c;
      return x;
    };
    if (off == 0 && v.size() == 2) model.select(static_cast<uint16_t>(v[0] | v[1] << 8));
    if (off == 4 && v.size() == 4) model.dma_high = static_cast<uint32_t>(be());
    if (off == 8 && v.size() == 4) {
      const uint64_t gpa = uint64_t{model.dma_high} << 32 | be();
      model.dma_high = 0;
      model.dma(gpa);
    }
    if (off == 4 && v.size() == 8) {
      model.dma_high = 0;
      model.dma(be());
    }
  }

  /// An address that is often interesting: in a region, at its edges, in the gap, near 2^64.
  static uint64_t address(FuzzInput& in) {
    const uint64_t bases[] = {0,
                              Rig::kLowSize,
                              Rig::kHighBase,
                              Rig::kHighBase + Rig::kHighSize,
                              uint64_t{1} << 32,
                              ~uint64_t{0}};
    const uint8_t pick = in.u8();
    if (pick >= 0xF0) return in.u64();
    const auto delta = static_cast<int16_t>(in.u16());
    return bases[pick % std::size(bases)] + static_cast<uint64_t>(int64_t{delta});
  }

  void dma_request(FuzzInput& in) {
    uint64_t desc = address(in);
    const uint16_t key = in.u8() % 4 == 0 ? in.u16() : static_cast<uint16_t>(in.u8() % 0x28);
    const uint32_t control = uint32_t{key} << 16 | (in.u8() % 8 ? in.u8() & 0x1E : in.u16());
    const uint32_t length = in.u8() % 4 ? in.u8() : in.u32();
    const uint64_t buf = address(in);
    if (model.ram(desc, 16)) {
      rig.put_descriptor(desc, control, length, buf);
      Rig::put_be(model.ram(desc, 16), control, 4);
      Rig::put_be(model.ram(desc, 16) + 4, length, 4);
      Rig::put_be(model.ram(desc, 16) + 8, buf, 8);
    }
    uint8_t a[8];
    Rig::put_be(a, desc, 8);
    if (in.u8() % 4 == 0) {
      write(4, std::span(a, 8));
    } else {
      write(4, std::span(a, 4));
      write(8, std::span(a + 4, 4));
    }
  }

  void save_restore() {
    snap::ByteWriter w;
    rig.dev().save_state(w);
    rig.recreate(items());
    snap::ByteReader r(w.data(), "fw_cfg");
    FUZZ_CHECK(rig.dev().restore_state(r).has_value());
    FUZZ_CHECK(r.expect_end().has_value());
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tern::testing::quiet_logs();
  FuzzInput in(data, size);
  Fuzz f;
  for (int n = 0; n < 512 && !in.empty(); ++n) {
    switch (in.u8() % 6) {
      case 0: {
        const uint16_t key = in.u8() % 2 ? static_cast<uint16_t>(in.u8() % 0x28) : in.u16();
        const uint8_t b[2] = {static_cast<uint8_t>(key), static_cast<uint8_t>(key >> 8)};
        f.write(0, b);
        break;
      }
      case 1:
        f.read(in.u8() % FwCfgDevice::kPortCount, in.width(4));
        break;
      case 2: {
        const size_t w = in.width(8);
        uint8_t v[8];
        for (size_t i = 0; i < w; ++i) v[i] = in.u8();
        f.write(in.u8() % FwCfgDevice::kPortCount, std::span(v, w));
        break;
      }
      case 3:
      case 4:
        f.dma_request(in);
        break;
      default:
        f.save_restore();
        break;
    }
    f.check_memory();
  }
  return 0;
}
