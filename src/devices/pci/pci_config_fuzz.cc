// libFuzzer target: PCI configuration mechanism #1 (ports 0xCF8-0xCFF) and the root's MMIO
// window, through the PIO and MMIO buses, with the host bridge and two virtio-pci functions on
// bus 0. Each input byte picks an operation — CONFIG_ADDRESS writes (any bus/slot/function/
// register, enable bit on or off), raw port accesses of 1, 2 or 4 bytes around the config ports,
// data-port writes (BAR sizing and relocation, command, MSI-X control, anything), BAR sizing
// probes, capability-list walks, MMIO reads and writes in the window — and the following bytes
// are its operands.
//
// Invariants: CONFIG_ADDRESS reads back as written; other bytes of 0xCF8-0xCFB, disabled cycles,
// other buses, functions 1-7, empty slots and accesses crossing the data dword read all-ones;
// a sized BAR reads back its size mask (unimplemented BARs 0); identity, header type, interrupt
// pin and the capability list never change and BARs stay size-aligned; a window access outside
// every decoded BAR reads all-ones and counts as stray, one inside reaches the first BAR there.
#include <array>
#include <cstdint>
#include <vector>

#include "base/testing/fuzz_input.h"
#include "bus/bus.h"
#include "devices/pci/pci_registers.h"
#include "virtio/transport/testing/virtio_pci_rig.h"

namespace {

using namespace tern;
using namespace tern::testing;
namespace vp = virtio_pci;

constexpr uint16_t kPort = pci::kConfigAddressPort;
constexpr uint8_t kSlots = 3;  // host bridge + two functions

uint64_t all_ones(size_t w) {
  return ~uint64_t{0} >> (64 - 8 * w);
}

struct Fuzz {
  VirtioPciRig rig{2};
  Bus pio{"pio"};
  Bus mmio{"mmio"};
  uint32_t address = 0;  // model of CONFIG_ADDRESS
  std::array<std::array<uint8_t, 256>, kSlots> initial{};
  std::array<std::vector<uint8_t>, kSlots> caps;  // capability IDs and offsets, as first walked

  Fuzz() {
    (void)rig.root.attach(pio, mmio);
    for (uint8_t s = 0; s < kSlots; ++s) {
      for (uint32_t off = 0; off < 256; off += 4)
        rig.root.config_read(s, 0, off, std::span<uint8_t>(initial[s].data() + off, 4));
      caps[s] = walk_caps(s);
    }
  }

  uint64_t port_read(uint16_t port, size_t w) {
    uint8_t b[4];
    pio.read(port, std::span<uint8_t>(b, w));
    return load_le(std::span<const uint8_t>(b, w));
  }
  void port_write(uint16_t port, uint64_t v, size_t w) {
    pio.write(port, std::span<const uint8_t>(reinterpret_cast<uint8_t*>(&v), w));
    if (port == kPort && w == 4) address = static_cast<uint32_t>(v);
  }
  void select(uint8_t slot, uint32_t reg) {
    port_write(kPort, pci::kConfigAddressEnable | uint32_t{slot} << 11 | (reg & 0xFC), 4);
  }
  uint32_t cfg(uint8_t slot, uint32_t reg, size_t w = 4) {
    uint8_t b[4] = {};
    rig.root.config_read(slot, 0, reg, std::span<uint8_t>(b, w));
    return static_cast<uint32_t>(load_le(std::span<const uint8_t>(b, w)));
  }

  /// What a data-port read of `w` bytes at 0xCFC + `byte` must return when it reaches no
  /// function (nullopt: it reaches one).
  std::optional<uint64_t> data_port_miss(uint32_t byte, size_t w) const {
    const uint32_t a = address;
    const bool hit = (a & pci::kConfigAddressEnable) && ((a >> 16) & 0xFF) == 0 &&
                     ((a >> 8) & 7) == 0 && ((a >> 11) & 0x1F) < kSlots && byte + w <= 4;
    if (hit) return std::nullopt;
    return all_ones(w);
  }

  void raw_read(FuzzInput& in) {
    size_t w = in.width(4);
    auto port = static_cast<uint16_t>(kPort - 2 + in.u8() % 12);
    uint64_t v = port_read(port, w);
    if (port < kPort || port > kPort + 7) {
      FUZZ_CHECK(v == all_ones(w));  // unclaimed
    } else if (port == kPort && w == 4) {
      FUZZ_CHECK(v == address);
    } else if (port < kPort + pci::kConfigDataOffset) {
      FUZZ_CHECK(v == all_ones(w));
    } else {
      uint32_t byte = port - kPort - pci::kConfigDataOffset;
      uint32_t reg = (address & 0xFC) + byte;
      if (auto miss = data_port_miss(byte, w))
        FUZZ_CHECK(v == *miss);
      else if (reg + w <= pci::kFirstCapability)  // header: no read side effects
        FUZZ_CHECK(v == cfg(static_cast<uint8_t>((address >> 11) & 0x1F), reg, w));
    }
  }

  void set_address(FuzzInput& in) {
    uint8_t b = in.u8();
    uint32_t a = (b & 1) ? 0 : pci::kConfigAddressEnable;
    if (b & 2) a |= uint32_t{in.u8()} << 16;      // another bus
    if (b & 4) a |= uint32_t{in.u8() % 8u} << 8;  // another function
    a |= uint32_t{(b & 8) ? in.u8() % 32u : in.u8() % kSlots} << 11;
    a |= in.u8() & ((b & 16) ? 0xFF : 0xFC);  // reserved low bits sometimes
    port_write(kPort, a, 4);
  }

  void data_write(FuzzInput& in) {
    size_t w = in.width(4);
    uint32_t byte = in.u8() % 4;
    uint32_t v = 0;
    switch (in.u8() % 4) {
      case 0:
        v = 0xFFFFFFFF;
        break;
      case 1:
        v = static_cast<uint32_t>(VirtioPciRig::kWindow) + (uint32_t{in.u16()} << 12);
        break;
      case 2:
        v = in.u8() % 8;
        break;  // command bits, MSI-X enable in the upper half, ...
      default:
        v = in.u32();
        break;
    }
    port_write(static_cast<uint16_t>(kPort + pci::kConfigDataOffset + byte), v, w);
  }

  void size_bar(FuzzInput& in) {
    uint8_t slot = in.u8() % kSlots;
    int bar = in.u8() % pci::kNumBars;
    uint32_t reg = pci::kBar0 + 4 * bar;
    select(slot, reg);
    uint32_t old = static_cast<uint32_t>(port_read(kPort + 4, 4));
    port_write(kPort + 4, 0xFFFFFFFF, 4);
    uint32_t mask = static_cast<uint32_t>(port_read(kPort + 4, 4));
    uint32_t size = slot == 0 || bar > 1 ? 0 : bar == 0 ? vp::kVirtioBarSize : vp::kMsixBarSize;
    FUZZ_CHECK(mask == (size ? ~(size - 1) & pci::kBarMemoryMask : 0));
    port_write(kPort + 4, old, 4);
    FUZZ_CHECK(port_read(kPort + 4, 4) == old);
  }

  std::vector<uint8_t> walk_caps(uint8_t slot) {
    std::vector<uint8_t> out;
    if (!(cfg(slot, pci::kStatus, 2) & pci::kStatusCapabilities)) return out;
    uint8_t p = static_cast<uint8_t>(cfg(slot, pci::kCapabilitiesPointer, 1));
    for (int guard = 0; p != 0 && guard < 48; ++guard) {
      FUZZ_CHECK(p >= pci::kFirstCapability && p % 4 == 0);
      out.push_back(p);
      out.push_back(static_cast<uint8_t>(cfg(slot, p, 1)));
      p = static_cast<uint8_t>(cfg(slot, p + 1, 1));
    }
    FUZZ_CHECK(p == 0);  // the list ends
    return out;
  }

  struct Window {
    uint64_t gpa, size;
    uint8_t slot, bar;
  };
  /// The decoded BARs from config space alone, in the root's lookup order (slot, then BAR).
  std::vector<Window> windows() {
    std::vector<Window> w;
    for (uint8_t s = 1; s < kSlots; ++s) {
      if (!(cfg(s, pci::kCommand, 2) & pci::kCommandMemory)) continue;
      for (uint8_t b = 0; b < 2; ++b) {
        uint64_t a = cfg(s, pci::kBar0 + 4 * b) & pci::kBarMemoryMask;
        if (a != 0) w.push_back({a, b == 0 ? vp::kVirtioBarSize : vp::kMsixBarSize, s, b});
      }
    }
    return w;
  }

  void window_access(FuzzInput& in, bool write) {
    size_t w = in.width();
    auto ws = windows();
    uint64_t gpa = VirtioPciRig::kWindow + in.u32() % 0x40000;
    if (!ws.empty() && in.u8() % 4) {
      const Window& t = ws[in.u8() % ws.size()];
      gpa = t.gpa + (in.u8() % 2 ? vp::kNumQueues : in.u16() % (t.size + 8));
    }
    if (gpa < VirtioPciRig::kWindow || gpa + w > VirtioPciRig::kWindow + VirtioPciRig::kWindowSize)
      return;
    const Window* hit = nullptr;
    for (const auto& t : ws) {
      if (gpa >= t.gpa && gpa + w <= t.gpa + t.size) {
        hit = &t;
        break;
      }
    }
    uint64_t stray = rig.root.stray_mmio();
    uint64_t v = in.u64();
    auto* p = reinterpret_cast<uint8_t*>(&v);
    if (write) {
      mmio.write(gpa, std::span<const uint8_t>(p, w));
    } else {
      v = 0;
      mmio.read(gpa, std::span<uint8_t>(p, w));
      if (!hit) FUZZ_CHECK(v == all_ones(w));
      if (hit && hit->bar == 0 && gpa - hit->gpa == vp::kNumQueues && w == 2) FUZZ_CHECK(v == 2);
    }
    FUZZ_CHECK(rig.root.stray_mmio() == stray + (hit ? 0 : 1));
  }

  void check() {
    for (uint8_t s = 0; s < kSlots; ++s) {
      const auto& i = initial[s];
      for (uint32_t off :
           {pci::kVendorId, pci::kDeviceId, pci::kSubsystemVendorId, pci::kSubsystemId})
        FUZZ_CHECK(cfg(s, off, 2) == (i[off] | uint32_t{i[off + 1]} << 8));
      for (uint32_t off :
           {pci::kRevisionId, pci::kClassCode, pci::kClassCode + 1, pci::kClassCode + 2,
            pci::kHeaderType, pci::kCapabilitiesPointer, pci::kInterruptPin})
        FUZZ_CHECK(cfg(s, off, 1) == i[off]);
      for (int b = 0; b < pci::kNumBars; ++b) {
        uint32_t v = cfg(s, pci::kBar0 + 4 * b);
        uint32_t size = s == 0 || b > 1 ? 0 : b == 0 ? vp::kVirtioBarSize : vp::kMsixBarSize;
        FUZZ_CHECK(size ? (v & (size - 1)) == 0 : v == 0);
      }
      FUZZ_CHECK(walk_caps(s) == caps[s]);
    }
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tern::testing::quiet_logs();
  FuzzInput in(data, size);
  Fuzz f;
  for (int n = 0; n < 256 && !in.empty(); ++n) {
    switch (in.u8() % 9) {
      case 0:
        f.set_address(in);
        break;
      case 1:
        f.raw_read(in);
        break;
      case 2: {
        size_t w = in.width(4);
        f.port_write(static_cast<uint16_t>(kPort - 2 + in.u8() % 12), in.u32(), w);
        break;
      }
      case 3:
      case 4:
        f.data_write(in);
        break;
      case 5:
        f.size_bar(in);
        break;
      case 6:
        f.window_access(in, false);
        break;
      case 7:
        f.window_access(in, true);
        break;
      default: {  // direct read of a data-port byte after a fresh select of a header register
        uint8_t slot = in.u8() % kSlots;
        f.select(slot, in.u8() % pci::kFirstCapability);
        f.raw_read(in);
        break;
      }
    }
    f.check();
  }
  return 0;
}
