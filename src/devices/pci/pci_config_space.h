// PciConfigSpace: the 256-byte type 0 configuration space of one PCI function — header fields,
// write masks, 32-bit memory BARs with the standard size probe, and a capability list.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>

#include "base/result.h"
#include "devices/pci/pci_device.h"
#include "devices/pci/pci_function.h"
#include "snapshot/codec.h"

namespace tern {

/// Identity of a PCI function (PCI 3.0 §6.2.1).
struct PciIdentity {
  uint16_t vendor_id = 0;
  uint16_t device_id = 0;
  uint16_t subsystem_vendor_id = 0;
  uint16_t subsystem_id = 0;
  uint8_t revision = 0;
  uint32_t class_code = 0;     ///< base class << 16 | subclass << 8 | prog-if.
  uint8_t interrupt_pin = 0;   ///< 0 = none, 1 = INTA#.
  uint8_t interrupt_line = 0xFF;  ///< Legacy IRQ the platform wired INTx to (0xFF: none).
};

/// Plain storage plus the PCI write rules; no locking (the owning device serialises access).
/// Only guest-writable bits change on write(): command (I/O, memory, bus master, INTx disable),
/// interrupt line, BAR address bits above the BAR's size (both halves of a 64-bit BAR), and
/// bytes a capability marks writable.
class PciConfigSpace {
 public:
  explicit PciConfigSpace(const PciIdentity& id);

  /// Declares a memory BAR (PCI 3.0 §6.2.5.1): size probe mask, type and prefetchable bits; its
  /// address is 0 until set_bar_address(). A bad declaration (index, size not a power of two
  /// ≥ 16, overlapping another BAR) is a programming error (CHECK).
  void declare_bar(const PciBarDecl& bar);
  /// Firmware's initial assignment of declared BAR `index` (size-aligned; CHECKed).
  void set_bar_address(int index, uint64_t gpa);
  /// set_bar_address() for every declared BAR from `p`, and the Interrupt Line from p.intx_irq
  /// (0xFF, not wired, also makes Interrupt Pin read 0 so the guest does not use INTx).
  void apply_placement(const PciPlacement& p);
  /// The declared BARs in declaration order.
  [[nodiscard]] const std::vector<PciBarDecl>& bar_declarations() const { return bars_; }
  /// declare_bar() of a 32-bit non-prefetchable memory BAR of `size` bytes at `gpa`.
  void add_memory_bar(int index, uint32_t size, uint32_t gpa);
  /// Appends a capability with `id` and `body` (the bytes after ID and next pointer); returns its
  /// offset. `writable` (same length as body, optional) holds per-byte guest write masks.
  uint8_t add_capability(uint8_t id, std::span<const uint8_t> body,
                         std::span<const uint8_t> writable = {});

  /// Reads data.size() bytes at `offset` (bytes past 255 read as 0xFF).
  void read(uint32_t offset, std::span<uint8_t> data) const;
  /// Applies a guest write through the write masks.
  void write(uint32_t offset, std::span<const uint8_t> data);

  [[nodiscard]] uint16_t command() const { return read16(0x04); }
  /// BAR `index`'s decoded base: nullopt if not a memory BAR or memory space is disabled.
  [[nodiscard]] std::optional<uint64_t> bar_address(int index) const;
  /// Declared size of BAR `index` (0 for the upper half of a 64-bit BAR or an unused register).
  [[nodiscard]] uint64_t bar_size(int index) const { return bar_size_[index]; }
  /// Every memory BAR currently decoded.
  [[nodiscard]] std::vector<PciBarWindow> memory_windows() const;

  [[nodiscard]] uint8_t read8(uint32_t off) const { return bytes_[off]; }
  [[nodiscard]] uint16_t read16(uint32_t off) const;
  [[nodiscard]] uint32_t read32(uint32_t off) const;
  /// Makes the bits set in `mask` of byte `off` guest-writable (device-specific registers, e.g.
  /// a chipset's PAM or PIRQ route registers; 0 makes the byte read-only again).
  void set_write_mask(uint32_t off, uint8_t mask) { wmask_[off] = mask; }
  [[nodiscard]] uint8_t write_mask(uint32_t off) const { return wmask_[off]; }
  /// Device-side stores (ignore write masks), e.g. status bits.
  void set8(uint32_t off, uint8_t v) { bytes_[off] = v; }
  void set16(uint32_t off, uint16_t v);
  void set32(uint32_t off, uint32_t v);

  /// Snapshot: the 256 bytes as the guest sees them (BAR values included).
  void save_state(snap::ByteWriter& w) const;
  /// Restores saved bytes into a config space built the same way: every bit the guest cannot
  /// write must equal this one's (else an error naming `device` and the offset), so BARs stay
  /// size-aligned and identity, capabilities and read-only fields cannot change.
  [[nodiscard]] Result<void> restore_state(snap::ByteReader& r, std::string_view device);

 private:
  std::array<uint8_t, 256> bytes_{};
  std::array<uint8_t, 256> wmask_{};
  std::array<uint64_t, 6> bar_size_{};
  std::array<bool, 6> bar_used_{};  // register taken by a declared BAR (either half)
  std::vector<PciBarDecl> bars_;
  uint8_t next_cap_ = 0x40;
  uint8_t last_cap_ = 0;  // offset of the last capability (0: none)
};

}  // namespace tern
