// ChipsetFunction: base of the PC chipset's PCI functions (i440FX host bridge, PIIX3 ISA bridge,
// PIIX4 PM): a type 0 configuration space with no BARs, behind one mutex.
#pragma once

#include <array>
#include <cstring>
#include <mutex>
#include <span>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "devices/device_state.h"
#include "devices/pci/pci_config_space.h"
#include "devices/pci/pci_device.h"
#include "devices/pci/pci_registers.h"
#include "snapshot/codec.h"

namespace tern {

/// Subsystem vendor/ID QEMU gives every PCI function ("Red Hat, Inc." / "QEMU Virtual Machine").
/// SeaBIOS's qemu_detect() requires them on the host bridge before it believes it runs on QEMU
/// (and then uses fw_cfg, its QEMU memory and PCI setup); the chipset functions all carry them.
inline constexpr uint16_t kQemuSubsystemVendorId = 0x1af4;
inline constexpr uint16_t kQemuSubsystemId = 0x1100;

/// A chipset function: configuration space only (no memory BARs, so bar_read() reads all-ones).
/// Subclasses declare their device-specific registers' write masks in the constructor
/// (PciConfigSpace::set_write_mask) and may override on_config_write() to act on a write after
/// it was applied through the masks. Thread-safe: config accesses are serialised by PciRoot,
/// accessors for the VMM take mu_.
class ChipsetFunction : public PciDevice {
 public:
  void config_read(uint32_t offset, std::span<uint8_t> data) override {
    std::lock_guard lock(mu_);
    config_.read(offset, data);
  }
  void config_write(uint32_t offset, std::span<const uint8_t> data) override {
    if (data.size() > 4 || offset + data.size() > pci::kConfigSpaceSize) return;
    std::lock_guard lock(mu_);
    std::array<uint8_t, 4> old{};
    config_.read(offset, std::span<uint8_t>(old.data(), data.size()));
    config_.write(offset, data);
    on_config_write(offset, data.size(), old);
  }
  std::vector<PciBarWindow> memory_windows() const override { return {}; }
  void bar_read(uint8_t, uint64_t, std::span<uint8_t> data) override {
    std::memset(data.data(), 0xFF, data.size());
  }
  void bar_write(uint8_t, uint64_t, std::span<const uint8_t>) override {}

  /// Snapshot (version 1): the 256-byte configuration space as the guest sees it.
  void save_state(snap::ByteWriter& w) const {
    std::lock_guard lock(mu_);
    w.u32(kStateVersion);
    config_.save_state(w);
  }
  /// Restores save_state()'s bytes: bits the guest cannot write must match, and the function's
  /// own check (check_restored_locked) must pass, else nothing changes. Errors name name().
  [[nodiscard]] Result<void> restore_state(snap::ByteReader& r) {
    TRY(devstate::expect_version(r, name(), kStateVersion));
    std::lock_guard lock(mu_);
    const PciConfigSpace before = config_;
    TRY(config_.restore_state(r, name()));
    if (auto ok = check_restored_locked(); !ok) {
      config_ = before;
      return ok;
    }
    after_restore_locked();
    return {};
  }

 protected:
  explicit ChipsetFunction(const PciIdentity& id) : config_(id) {}
  /// Called under mu_ after a guest write of `len` (1..4) bytes at `offset` went through the
  /// masks; `old` holds those bytes as they were before it.
  virtual void on_config_write(uint32_t offset, size_t len, const std::array<uint8_t, 4>& old) {
    (void)offset;
    (void)len;
    (void)old;
  }
  /// Refuses restored register values the guest could not have produced (under mu_).
  [[nodiscard]] virtual Result<void> check_restored_locked() { return {}; }
  /// Publishes restored registers (hooks, cached values; under mu_).
  virtual void after_restore_locked() {}
  /// True when [offset, offset+len) covers register byte `reg`.
  static bool covers(uint32_t offset, size_t len, uint32_t reg) {
    return reg >= offset && reg < offset + len;
  }

  static constexpr uint32_t kStateVersion = 1;
  mutable std::mutex mu_;
  PciConfigSpace config_;
};

}  // namespace tern
