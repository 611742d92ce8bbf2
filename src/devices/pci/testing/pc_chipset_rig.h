// PcChipsetRig (tests and fuzzers only): a PciRoot with the PC chipset attached on a PIO bus,
// hooks that count, a settable PM-timer clock, and port/config helpers.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "base/result.h"
#include "bus/bus.h"
#include "devices/pci/pc_chipset.h"
#include "devices/pci/pci_registers.h"
#include "devices/pci/pci_root.h"

namespace tern::testing {

/// One configuration byte of a function, straight (no config port).
inline uint8_t cfg_read8(PciDevice& d, uint32_t off) {
  uint8_t b = 0;
  d.config_read(off, std::span<uint8_t>(&b, 1));
  return b;
}
inline void cfg_write8(PciDevice& d, uint32_t off, uint8_t v) {
  d.config_write(off, std::span<const uint8_t>(&v, 1));
}

struct PcChipsetRig {
  PcChipsetRig() {
    PcChipsetHooks h;
    h.on_reset = [this] { ++resets; };
    h.on_poweroff = [this] { ++poweroffs; };
    h.on_pam_change = [this](unsigned i, uint8_t v) { pam_changes.push_back({i, v}); };
    h.on_pirq_route = [this](unsigned p, std::optional<uint8_t> irq) {
      pirq_routes.push_back({p, irq});
    };
    h.pm_timer_clock = [this] { return now_ns; };
    chipset = attach_pc_chipset(root, pio, std::move(h)).value();
    TERN_CHECK(root.attach(pio, mmio).has_value());
  }

  uint32_t in(uint16_t port, size_t width) {
    uint8_t b[4] = {};
    pio.read(port, std::span<uint8_t>(b, width));
    uint32_t v = 0;
    std::memcpy(&v, b, width);
    return v;
  }
  void out(uint16_t port, uint32_t v, size_t width) {
    pio.write(port, std::span<const uint8_t>(reinterpret_cast<uint8_t*>(&v), width));
  }
  static uint32_t address(uint8_t slot, uint8_t fn, uint8_t reg) {
    return pci::kConfigAddressEnable | uint32_t{slot} << 11 | uint32_t{fn} << 8 | (reg & 0xFCu);
  }
  /// Config read/write through mechanism #1 (0xCF8/0xCFC), any width inside the dword.
  uint32_t cfg_read(uint8_t slot, uint8_t fn, uint8_t reg, size_t width) {
    out(0xCF8, address(slot, fn, reg), 4);
    return in(static_cast<uint16_t>(0xCFC + (reg & 3)), width);
  }
  void cfg_write(uint8_t slot, uint8_t fn, uint8_t reg, uint32_t v, size_t width) {
    out(0xCF8, address(slot, fn, reg), 4);
    out(static_cast<uint16_t>(0xCFC + (reg & 3)), v, width);
  }

  Bus pio{"pio"};
  Bus mmio{"mmio"};
  PciRoot root{0xC0000000, 0x10000000};
  std::unique_ptr<PcChipset> chipset;
  int resets = 0;
  int poweroffs = 0;
  uint64_t now_ns = 0;
  struct PamChange {
    unsigned index;
    uint8_t value;
    bool operator==(const PamChange&) const = default;
  };
  std::vector<PamChange> pam_changes;
  struct PirqRoute {
    unsigned pirq;
    std::optional<uint8_t> irq;
    bool operator==(const PirqRoute&) const = default;
  };
  std::vector<PirqRoute> pirq_routes;
};

}  // namespace tern::testing
