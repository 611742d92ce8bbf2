// PciFunction: the interface every PCI function tern emulates implements (virtio-pci transports
// today; an NVMe controller next) — the BARs it declares, where the platform places it, and its
// life cycle: quiesce for snapshots, a Persist-style save/restore pair, counters.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "devices/pci/pci_device.h"
#include "snapshot/codec.h"
#include "stats/device_counters.h"

namespace tern {

/// One memory BAR a function declares (PCI 3.0 §6.2.5.1). A 64-bit BAR occupies registers
/// `index` and `index + 1`.
struct PciBarDecl {
  uint8_t index = 0;          ///< BAR register 0-5 (0-4 for a 64-bit BAR).
  uint64_t size = 0;          ///< Bytes; a power of two ≥ 16 (≤ 2 GiB for a 32-bit BAR).
  bool is_64bit = false;      ///< Memory type 10b: 64-bit address.
  bool prefetchable = false;  ///< Prefetchable bit (3).
};

/// Where the platform put a function before the guest ran: the firmware-style initial address of
/// every declared BAR (size-aligned, inside PciRoot's MMIO window) and the legacy IRQ its INTx
/// pin is wired to.
struct PciPlacement {
  std::array<uint64_t, 6> bar_gpa{};  ///< Indexed by BAR register; only declared BARs are used.
  uint8_t intx_irq = 0xFF;            ///< Interrupt Line / KVM_IRQ_LINE pin; 0xFF: not wired.
};

/// A PCI function on bus 0 (type 0 header). PciDevices places and owns them.
///
/// Order of calls: construction (the function knows its BARs) → bars() → place() once → the root
/// dispatches config and BAR accesses (PciDevice, any vCPU thread) → quiesce()/save_state()/
/// unquiesce() with the vCPUs paused, or restore_state() on a freshly placed function before any
/// vCPU runs → destruction (stops the function's threads). counters() any thread, any time.
class PciFunction : public PciDevice {
 public:
  /// Device kind for the snapshot and statistics ("virtio-blk", "virtio-rng", "nvme", ...).
  [[nodiscard]] virtual std::string_view kind() const = 0;
  /// The memory BARs this function decodes, in the order the platform should allocate them.
  [[nodiscard]] virtual std::vector<PciBarDecl> bars() const = 0;
  /// Programs the initial BAR addresses and the INTx wiring. Once, before the function is on the
  /// bus. Errors: platform failures (e.g. registering ioeventfds).
  [[nodiscard]] virtual Result<void> place(const PciPlacement& placement) = 0;

  /// Snapshots: brings the function to a consistent point (no request in flight); unquiesce()
  /// resumes it. The defaults suit functions without threads.
  virtual void quiesce() {}
  virtual void unquiesce() {}
  /// The function's whole state (config space included), versioned by the function. Quiesced.
  virtual void save_state(snap::ByteWriter& w) const = 0;
  /// Restores save_state()'s bytes into a function built and placed the same way. Untrusted
  /// input: every field validated, errors name the function and the field.
  [[nodiscard]] virtual Result<void> restore_state(snap::ByteReader& r) = 0;

  /// Counters since the function was built (relaxed reads; must not block on locks a vCPU can
  /// hold while it waits for the control thread — see device_activator.h).
  [[nodiscard]] virtual DeviceCounters counters() const = 0;
};

}  // namespace tern
