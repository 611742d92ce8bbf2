// IntxRouter: the wired-OR of PCI INTx lines that share one ISA IRQ, for firmware boots where the
// guest runs PCI IRQs level-triggered.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>

#include "base/result.h"
#include "devices/pci/pci_platform.h"
#include "snapshot/codec.h"

namespace tern {

/// PCI INTx is level-sensitive and shareable: the IRQ is asserted while any function routed to
/// it asserts its INTx#. KVM_IRQ_LINE from userspace carries one level per IRQ (one source id),
/// so two functions writing their own levels to a shared IRQ would lower it under each other —
/// with a level-triggered IOAPIC pin the second function's interrupt is then lost until the
/// guest happens to read its status. The router keeps each source's level and drives the IRQ
/// with their OR.
///
/// Each function gets its own PciPlatform from source(): MSI-X and ioeventfd calls pass
/// through to the underlying platform; set_irq_level(irq, level) records this source's level
/// on `irq` and reports the OR to the platform when it changes. A raise while the OR is already
/// high is passed on too (it is the edge an edge-triggered pin needs, and a no-op for a level
/// one), so direct-boot-style edge pulses keep working; a lower that leaves no source asserting
/// is always passed on. The router outlives its sources.
/// Thread-safe (one mutex; set_irq_level is called with device locks held and is quick).
class IntxRouter {
 public:
  static constexpr unsigned kIrqs = 24;  ///< IOAPIC pins / GSIs 0-23.
  static constexpr unsigned kMaxSources = 64;

  explicit IntxRouter(PciPlatform& platform) : platform_(platform) {}

  /// A PciPlatform for one function (at most kMaxSources; CHECKed).
  [[nodiscard]] std::unique_ptr<PciPlatform> source();
  /// The OR of all sources' levels on `irq` (tests, statistics).
  [[nodiscard]] bool level(uint32_t irq) const;

  /// Snapshot (version 1): every source's level on every IRQ. A restored function adopts its
  /// INTx level without driving it (the irqchip's restored state holds the line), so the router
  /// must be restored too, or a later lower by one source would not see the other's level.
  void save_state(snap::ByteWriter& w) const;
  /// Restores save_state()'s bytes into a router with the same number of sources, created in
  /// the same order; adopts the levels without driving them. Errors name "intx-router".
  [[nodiscard]] Result<void> restore_state(snap::ByteReader& r);

 private:
  class Source;
  void set(unsigned source, uint32_t irq, bool level);

  PciPlatform& platform_;
  mutable std::mutex mu_;
  unsigned sources_ = 0;
  std::array<uint64_t, kIrqs> asserted_{};  // bit s: source s asserts the IRQ
};

}  // namespace tern
