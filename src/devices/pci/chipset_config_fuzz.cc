// libFuzzer target: the PC chipset of firmware boots as a hostile guest sees it — configuration
// mechanism #1 sweeps of 00:00.0 (i440FX), 00:01.0 (PIIX3) and 00:01.3 (PIIX4 PM) and of the
// absent functions beside them, raw accesses of 1, 2 and 4 bytes around 0xCF8-0xCFF (the Reset
// Control register at 0xCF9 among them), ELCR at 0x4D0/0x4D1, the PM block at 0xB000 with a
// clock that only moves forward, chipset resets and snapshot round trips. Each input byte picks
// an operation; the following bytes are its operands.
//
// Invariants: identities and header types never change; reserved bits of PAM, SMRAM, PIRQRC,
// PMBA, PMREGMISC and ELCR read 0, DEVACTB keeps APMC_EN, SMRAM never has D_LCK and D_OPEN both
// set; absent functions read all-ones; CONFIG_ADDRESS reads back as written; RC reads back only
// SRST and a reset is requested exactly by byte writes with RCPU set; the PM block reads
// all-ones unless PMIOSE is on with PMBA = 0xB000, and then PMTMR has 24 bits and never runs
// backwards (modulo 2^24, between reads less than a wrap apart); the PAM hook reports the
// register values; a saved state restores into a fresh chipset and reads back the same.
#include <array>
#include <cstdint>
#include <vector>

#include "arch/x86/layout.h"
#include "base/testing/fuzz_input.h"
#include "devices/pci/testing/pc_chipset_rig.h"

namespace {

using namespace tern;
using namespace tern::testing;

constexpr uint16_t kCf8 = pci::kConfigAddressPort;
struct Fn {
  uint8_t slot, fn;
};
constexpr Fn kFns[] = {{0, 0}, {1, 0}, {1, 3}};

uint64_t all_ones(size_t w) {
  return ~uint64_t{0} >> (64 - 8 * w);
}

struct Fuzz {
  PcChipsetRig rig;
  std::array<std::array<uint32_t, 4>, 3> identity{};  // dwords 0x00, 0x08, 0x0C, 0x2C
  uint32_t address = 0;
  int resets_expected = 0;
  uint32_t last_tmr = 0;
  uint64_t last_tmr_ns = 0;
  bool have_tmr = false;

  Fuzz() {
    for (size_t i = 0; i < 3; ++i) identity[i] = ident(kFns[i]);
  }
  std::array<uint32_t, 4> ident(Fn f) {
    return {cfg(f, 0x00), cfg(f, 0x08), cfg(f, 0x0C) & 0x00FF0000u, cfg(f, 0x2C)};
  }
  uint32_t cfg(Fn f, uint8_t reg, size_t w = 4) {
    uint32_t v = 0;
    rig.root.config_read(f.slot, f.fn, reg, std::span<uint8_t>(reinterpret_cast<uint8_t*>(&v), w));
    return v;
  }
  bool pm_decoding() {
    const uint32_t pmba = cfg(kFns[2], Piix4Pm::kPmba);
    return (cfg(kFns[2], Piix4Pm::kPmregmisc, 1) & 1) && (pmba & 0xFFC0) == x86::kPiix4PmBase;
  }

  void set_address(FuzzInput& in) {
    const uint8_t b = in.u8();
    const Fn f = kFns[in.u8() % 3];
    uint32_t a = (b & 1) ? 0 : pci::kConfigAddressEnable;
    a |= uint32_t{(b & 2) ? in.u8() % 32u : f.slot} << 11;
    a |= uint32_t{(b & 4) ? in.u8() % 8u : f.fn} << 8;
    if (b & 8) a |= uint32_t{in.u8()} << 16;  // another bus
    a |= in.u8() & ((b & 16) ? 0xFF : 0xFC);
    port_write(kCf8, a, 4);
  }
  void port_write(uint16_t port, uint32_t v, size_t w) {
    rig.out(port, v, w);
    if (port == kCf8 && w == 4) address = v;
    if (port == x86::kResetControlPort && w == 1 && (v & ResetControl::kRcpu)) ++resets_expected;
    FUZZ_CHECK(rig.resets == resets_expected);
  }
  void raw_read(FuzzInput& in) {
    const size_t w = in.width(4);
    const auto port = static_cast<uint16_t>(kCf8 + in.u8() % 8);
    const uint64_t v = rig.in(port, w);
    if (port == kCf8 && w == 4) {
      FUZZ_CHECK(v == address);
    } else if (port == x86::kResetControlPort && w == 1) {
      FUZZ_CHECK((v & ~uint64_t{ResetControl::kSrst}) == 0);
    } else if (port < kCf8 + 4) {
      FUZZ_CHECK(v == all_ones(w));
    } else {
      const uint32_t byte = port - kCf8 - 4;
      const uint8_t slot = (address >> 11) & 0x1F, fn = (address >> 8) & 7;
      const bool present = (slot == 0 && fn == 0) || (slot == 1 && (fn == 0 || fn == 3));
      const bool hit = (address & pci::kConfigAddressEnable) && ((address >> 16) & 0xFF) == 0 &&
                       present && byte + w <= 4;
      if (!hit) FUZZ_CHECK(v == all_ones(w));
    }
  }
  void data_write(FuzzInput& in) {
    const size_t w = in.width(4);
    const uint32_t byte = in.u8() % 4;
    uint32_t v;
    switch (in.u8() % 4) {
      case 0:
        v = 0xFFFFFFFF;
        break;
      case 1:
        v = x86::kPiix4PmBase | (in.u8() & 1);
        break;
      case 2:
        v = in.u8() % 4 ? 0x33333333u & in.u32() : in.u8();
        break;
      default:
        v = in.u32();
        break;
    }
    port_write(static_cast<uint16_t>(kCf8 + 4 + byte), v, w);
  }
  void pm_access(FuzzInput& in, bool write) {
    const size_t w = in.width(4);
    const uint16_t port = static_cast<uint16_t>(x86::kPiix4PmBase + in.u8() % 0x44);
    if (port + w > x86::kPiix4PmBase + x86::kPiix4PmBlockSize) return;
    if (write) {
      port_write(port, in.u32(), w);
      return;
    }
    const bool decoding = pm_decoding();
    const uint64_t v = rig.in(port, w);
    if (!decoding) {
      FUZZ_CHECK(v == all_ones(w));
      return;
    }
    if (port == x86::kPiix4PmTimerPort && w == 4) {
      FUZZ_CHECK(v <= PmTimer::kMask);
      const auto tmr = static_cast<uint32_t>(v);
      // Less than one wrap (4.69 s) apart: the counter moved forward by the elapsed ticks.
      if (have_tmr && rig.now_ns - last_tmr_ns < 4'000'000'000) {
        const uint32_t delta = (tmr - last_tmr) & PmTimer::kMask;
        const uint64_t expect = (rig.now_ns - last_tmr_ns) * 3'579'545 / 1'000'000'000;
        FUZZ_CHECK(delta + 1 >= expect && delta <= expect + 1);
      }
      last_tmr = tmr;
      last_tmr_ns = rig.now_ns;
      have_tmr = true;
    }
  }
  void elcr(FuzzInput& in) {
    const size_t w = in.width(2);
    const uint16_t port = static_cast<uint16_t>(x86::kElcrPort + in.u8() % 2);
    if (in.u8() & 1) port_write(port, in.u16(), w);
    const uint64_t v = rig.in(port, w);
    const uint64_t mask =
        port == x86::kElcrPort ? (w == 1 ? 0xF8 : 0xDEF8) : (w == 1 ? 0xDE : 0xFFDE);
    FUZZ_CHECK((v & ~mask) == 0);
  }
  void round_trip() {
    snap::ByteWriter w;
    rig.chipset->save_state(w);
    PcChipsetRig other;
    other.now_ns = rig.now_ns;
    snap::ByteReader r(w.data(), "fuzz");
    FUZZ_CHECK(other.chipset->restore_state(r).has_value());
    FUZZ_CHECK(r.remaining() == 0);
    for (const Fn& f : kFns)
      for (uint8_t reg = 0; reg < 0xFC; reg += 4) {
        uint32_t a = 0, b = 0;
        rig.root.config_read(f.slot, f.fn, reg,
                             std::span<uint8_t>(reinterpret_cast<uint8_t*>(&a), 4));
        other.root.config_read(f.slot, f.fn, reg,
                               std::span<uint8_t>(reinterpret_cast<uint8_t*>(&b), 4));
        FUZZ_CHECK(a == b);
      }
    FUZZ_CHECK(other.chipset->elcr->value() == rig.chipset->elcr->value());
    FUZZ_CHECK(other.chipset->reset_control->value() == rig.chipset->reset_control->value());
  }

  void check() {
    for (size_t i = 0; i < 3; ++i) FUZZ_CHECK(ident(kFns[i]) == identity[i]);
    const Fn hb = kFns[0], isa = kFns[1], pm = kFns[2];
    FUZZ_CHECK((cfg(hb, I440fxHostBridge::kPam0, 1) & ~0x30u) == 0);
    for (unsigned i = 1; i < I440fxHostBridge::kPamCount; ++i) {
      const uint32_t v = cfg(hb, static_cast<uint8_t>(I440fxHostBridge::kPam0 + i), 1);
      FUZZ_CHECK((v & ~0x33u) == 0);
      FUZZ_CHECK(rig.chipset->host_bridge->pam(i) == v);
    }
    for (const auto& c : rig.pam_changes) FUZZ_CHECK(c.index < I440fxHostBridge::kPamCount);
    if (!rig.pam_changes.empty()) {
      const auto& c = rig.pam_changes.back();
      FUZZ_CHECK(c.value == rig.chipset->host_bridge->pam(c.index));
    }
    const uint32_t smram = cfg(hb, I440fxHostBridge::kSmram, 1);
    FUZZ_CHECK((smram & 0x87) == 0x02);
    FUZZ_CHECK(
        !((smram & I440fxHostBridge::kSmramDLck) && (smram & I440fxHostBridge::kSmramDOpen)));
    FUZZ_CHECK((cfg(isa, Piix3IsaBridge::kPirqrc) & 0x70707070u) == 0);
    for (const auto& p : rig.pirq_routes) FUZZ_CHECK(p.pirq < 4 && (!p.irq || *p.irq < 16));
    const uint32_t pmba = cfg(pm, Piix4Pm::kPmba);
    FUZZ_CHECK((pmba & 0xFFFF003Fu) == 1);
    FUZZ_CHECK(cfg(pm, Piix4Pm::kDevactb) == Piix4Pm::kDevactbApmcEn);
    FUZZ_CHECK((cfg(pm, Piix4Pm::kPmregmisc, 1) & ~1u) == 0);
    FUZZ_CHECK(rig.chipset->pm->pm_base() == (pmba & 0xFFC0));
    FUZZ_CHECK((rig.chipset->elcr->value() & ~0xDEF8u) == 0);
    FUZZ_CHECK(rig.resets == resets_expected);
    for (uint8_t fn : {1, 2, 4, 5, 6, 7}) FUZZ_CHECK(cfg({1, fn}, 0) == 0xFFFFFFFFu);
    FUZZ_CHECK(cfg({2, 0}, 0) == 0xFFFFFFFFu);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tern::testing::quiet_logs();
  FuzzInput in(data, size);
  Fuzz f;
  for (int n = 0; n < 256 && !in.empty(); ++n) {
    switch (in.u8() % 12) {
      case 0:
        f.set_address(in);
        break;
      case 1:
      case 2:
        f.data_write(in);
        break;
      case 3:
        f.raw_read(in);
        break;
      case 4: {  // anything around the config ports, the RC byte included
        const size_t w = in.width(4);
        f.port_write(static_cast<uint16_t>(kCf8 + in.u8() % 8), in.u32(), w);
        break;
      }
      case 5:
        f.elcr(in);
        break;
      case 6:
        f.pm_access(in, false);
        break;
      case 7:
        f.pm_access(in, true);
        break;
      case 8:
        f.rig.now_ns += uint64_t{in.u32()} * (in.u8() % 4 == 0 ? 1000 : 1);
        break;
      case 9:
        f.rig.chipset->reset();
        break;
      case 10:
        f.round_trip();
        break;
      default: {  // sweep: every register of one chipset function read back after a write
        const Fn fn = kFns[in.u8() % 3];
        const uint8_t reg = in.u8() & 0xFC;
        f.port_write(kCf8, PcChipsetRig::address(fn.slot, fn.fn, reg), 4);
        f.port_write(kCf8 + 4, in.u32(), 4);
        f.raw_read(in);
        break;
      }
    }
    f.check();
  }
  return 0;
}
