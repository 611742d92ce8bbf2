// IrqLine: how a device drives its interrupt line without knowing about KVM.
#pragma once

#include <functional>
#include <utility>

namespace tern {

/// One interrupt line from a device to the interrupt controller (level-triggered semantics).
/// The device calls it with the line's current level whenever that level may have changed; the
/// VMM implements it with KVM_IRQ_LINE. Devices call it with their own lock held, so it must be
/// quick and must not call back into the device.
using IrqLine = std::function<void(bool level)>;

/// A device's view of its IrqLine: remembers the level and reports changes only.
///
/// Not thread-safe: the owning device serialises calls with its own lock. An edge-triggered
/// input (the IOAPIC's ISA pins, the 8259) sees an edge only on a 0 -> 1 change, so a device
/// with a new event while its line is already high lowers it first (set(false), set(true)).
class IrqPin {
 public:
  explicit IrqPin(IrqLine line) : line_(std::move(line)) {}

  /// Drives the line to `level`; reports it only if it changed.
  void set(bool level) {
    if (level == level_) return;
    level_ = level;
    if (line_) line_(level);
  }

  [[nodiscard]] bool level() const { return level_; }
  /// Snapshot restore: adopts `level` without reporting it (the interrupt controller's own
  /// restored state already holds the line's level; reporting it could inject a second edge).
  void restore_level(bool level) { level_ = level; }

 private:
  IrqLine line_;
  bool level_ = false;
};

}  // namespace tern
