// MsixCapability: builds a function's MSI-X capability (PCI 3.0 §6.8.2) in its config space and
// routes the BAR accesses that hit the table or the PBA to its MsixTable. Any PCI function with
// MSI-X uses it (the virtio-pci transport; an NVMe controller).
#pragma once

#include <cstdint>
#include <span>

#include "devices/pci/msix_table.h"
#include "devices/pci/pci_config_space.h"

namespace tern {

/// Where the MSI-X structures live (§6.8.2.4, §6.8.2.5).
struct MsixLayout {
  uint16_t vectors = 1;       ///< Table size, 1..2048 (encoded N - 1 in Message Control).
  uint8_t table_bar = 0;      ///< BIR of the table: a declared memory BAR.
  uint32_t table_offset = 0;  ///< Byte offset in that BAR, 8-byte aligned.
  uint8_t pba_bar = 0;        ///< BIR of the Pending Bit Array.
  uint32_t pba_offset = 0;    ///< 8-byte aligned; must not overlap the table in the same BAR.
};

/// The capability as placed in one config space. Message Control's Enable (bit 15) and Function
/// Mask (bit 14) are its only guest-writable bits; table size, Table Offset/BIR and PBA
/// Offset/BIR are read-only. Not thread-safe by itself: the owning function serialises config
/// space access; MsixTable locks itself.
class MsixCapability {
 public:
  MsixCapability() = default;
  /// Appends the capability to `config`, whose BARs are already declared. A layout that does not
  /// fit (BIR not a declared BAR, structures past the BAR's end, misaligned, overlapping) is a
  /// programming error (CHECK).
  static MsixCapability add(PciConfigSpace& config, const MsixLayout& layout);

  /// Config space offset of the capability (its ID byte); 0 before add().
  [[nodiscard]] uint8_t offset() const { return offset_; }
  [[nodiscard]] const MsixLayout& layout() const { return layout_; }
  /// Enable and Function Mask as the guest wrote them into `config`.
  [[nodiscard]] bool enabled(const PciConfigSpace& config) const;
  [[nodiscard]] bool function_masked(const PciConfigSpace& config) const;
  /// Pushes Enable and Function Mask from `config` into `table`. Call after every config write
  /// and after a restore.
  void sync(const PciConfigSpace& config, MsixTable& table) const;

  /// A BAR read that falls entirely inside the table or the PBA: served, returns true. Else
  /// returns false and `data` is untouched.
  bool bar_read(const MsixTable& table, uint8_t bar, uint64_t offset,
                std::span<uint8_t> data) const;
  /// A BAR write inside the table: applied, returns true. Else false (PBA writes, which the
  /// spec leaves undefined, included: the caller counts them).
  bool bar_write(MsixTable& table, uint8_t bar, uint64_t offset,
                 std::span<const uint8_t> data) const;

 private:
  uint8_t offset_ = 0;
  MsixLayout layout_;
};

}  // namespace tern
