// BusDevice: what a PIO or MMIO range dispatches to.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace tern {

/// A device that claims a range of I/O ports or MMIO addresses.
///
/// `offset` is relative to the start of the range the device was inserted at; `data.size()` is the
/// access width in bytes (1, 2, 4, or 8 for MMIO). Threading: read()/write() may be called
/// concurrently from several vCPU threads (and from the control thread); every device serialises
/// its own state (typically one mutex). They must never block for long and must never fail on
/// guest input: unknown registers read as all-ones (or 0 where the hardware says so) and ignore
/// writes.
class BusDevice {
 public:
  virtual ~BusDevice() = default;
  /// Short stable name used in logs and statistics, e.g. "serial0", "i8042".
  [[nodiscard]] virtual std::string_view name() const = 0;
  virtual void read(uint64_t offset, std::span<uint8_t> data) = 0;
  virtual void write(uint64_t offset, std::span<const uint8_t> data) = 0;
};

}  // namespace tern
