#include "devices/pci/msix_capability.h"

#include <algorithm>

#include "base/result.h"
#include "devices/pci/pci_registers.h"

namespace tern {

namespace {

void put_le(std::span<uint8_t> d, uint32_t v) {
  for (size_t i = 0; i < d.size(); ++i) d[i] = static_cast<uint8_t>(v >> (8 * i));
}

bool inside(uint64_t offset, size_t len, uint32_t start, uint32_t bytes) {
  return offset >= start && offset - start + len <= bytes;
}

}  // namespace

MsixCapability MsixCapability::add(PciConfigSpace& config, const MsixLayout& layout) {
  const uint32_t table_bytes = uint32_t{layout.vectors} * pci::kMsixEntrySize;
  const uint32_t pba_bytes = ((uint32_t{layout.vectors} + 63) / 64) * 8;
  TERN_CHECK(layout.vectors >= 1 && layout.vectors <= pci::kMsixMaxVectors);
  TERN_CHECK(layout.table_offset % 8 == 0 && layout.pba_offset % 8 == 0);
  TERN_CHECK(layout.table_bar < pci::kNumBars && layout.pba_bar < pci::kNumBars);
  TERN_CHECK(uint64_t{layout.table_offset} + table_bytes <= config.bar_size(layout.table_bar));
  TERN_CHECK(uint64_t{layout.pba_offset} + pba_bytes <= config.bar_size(layout.pba_bar));
  TERN_CHECK(layout.table_bar != layout.pba_bar ||
             layout.pba_offset >= layout.table_offset + table_bytes ||
             layout.table_offset >= layout.pba_offset + pba_bytes);
  // Body after Capability ID and Next Pointer: Message Control (N - 1), Table Offset/BIR,
  // PBA Offset/BIR (§6.8.2.3-5).
  uint8_t body[pci::kMsixCapSize - 2] = {};
  put_le(std::span<uint8_t>(body, 2), layout.vectors - 1u);
  put_le(std::span<uint8_t>(body + 2, 4), layout.table_offset | layout.table_bar);
  put_le(std::span<uint8_t>(body + 6, 4), layout.pba_offset | layout.pba_bar);
  uint8_t writable[sizeof body] = {};
  writable[1] = (pci::kMsixControlEnable | pci::kMsixControlFunctionMask) >> 8;
  MsixCapability c;
  c.layout_ = layout;
  c.offset_ = config.add_capability(pci::kCapMsix, body, writable);
  return c;
}

bool MsixCapability::enabled(const PciConfigSpace& config) const {
  return offset_ && (config.read16(offset_ + pci::kMsixMessageControl) & pci::kMsixControlEnable);
}

bool MsixCapability::function_masked(const PciConfigSpace& config) const {
  return offset_ &&
         (config.read16(offset_ + pci::kMsixMessageControl) & pci::kMsixControlFunctionMask);
}

void MsixCapability::sync(const PciConfigSpace& config, MsixTable& table) const {
  table.set_control(enabled(config), function_masked(config));
}

bool MsixCapability::bar_read(const MsixTable& table, uint8_t bar, uint64_t offset,
                              std::span<uint8_t> data) const {
  if (bar == layout_.table_bar &&
      inside(offset, data.size(), layout_.table_offset, table.table_bytes())) {
    table.table_read(offset - layout_.table_offset, data);
    return true;
  }
  if (bar == layout_.pba_bar &&
      inside(offset, data.size(), layout_.pba_offset, table.pba_bytes())) {
    table.pba_read(offset - layout_.pba_offset, data);
    return true;
  }
  return false;
}

bool MsixCapability::bar_write(MsixTable& table, uint8_t bar, uint64_t offset,
                               std::span<const uint8_t> data) const {
  if (bar != layout_.table_bar ||
      !inside(offset, data.size(), layout_.table_offset, table.table_bytes()))
    return false;
  table.table_write(offset - layout_.table_offset, data);
  return true;
}

}  // namespace tern
