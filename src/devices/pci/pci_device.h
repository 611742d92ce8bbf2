// PciDevice: what the PCI root complex (pci_root.h) dispatches configuration and BAR accesses to.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace tern {

/// One memory BAR as the guest currently decodes it: guest-physical base and size in bytes.
struct PciBarWindow {
  uint8_t bar = 0;   ///< BAR index 0-5.
  uint64_t gpa = 0;  ///< Guest-physical base address.
  uint64_t size = 0;
};

/// A PCI function (type 0 header) on bus 0.
///
/// Threading: config_read/config_write are serialised by the root (one configuration mechanism);
/// bar_read/bar_write come from any vCPU thread concurrently with them, so the device locks its
/// own state. Nothing here may fail on guest input.
class PciDevice {
 public:
  virtual ~PciDevice() = default;
  [[nodiscard]] virtual std::string_view name() const = 0;
  /// Configuration space access: `offset` 0..255, data 1, 2 or 4 bytes, naturally aligned.
  virtual void config_read(uint32_t offset, std::span<uint8_t> data) = 0;
  virtual void config_write(uint32_t offset, std::span<const uint8_t> data) = 0;
  /// Memory BARs decoded right now (memory space enabled in the command register, address
  /// programmed). The root re-reads this after every config write to the device.
  [[nodiscard]] virtual std::vector<PciBarWindow> memory_windows() const = 0;
  /// Access at `offset` bytes into memory BAR `bar` (width 1, 2, 4 or 8).
  virtual void bar_read(uint8_t bar, uint64_t offset, std::span<uint8_t> data) = 0;
  virtual void bar_write(uint8_t bar, uint64_t offset, std::span<const uint8_t> data) = 0;
};

}  // namespace tern
