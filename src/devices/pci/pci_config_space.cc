#include "devices/pci/pci_config_space.h"

#include <algorithm>

#include "base/result.h"
#include "devices/pci/pci_registers.h"

namespace tern {

PciConfigSpace::PciConfigSpace(const PciIdentity& id) {
  set16(pci::kVendorId, id.vendor_id);
  set16(pci::kDeviceId, id.device_id);
  bytes_[pci::kRevisionId] = id.revision;
  bytes_[pci::kClassCode] = static_cast<uint8_t>(id.class_code);
  bytes_[pci::kClassCode + 1] = static_cast<uint8_t>(id.class_code >> 8);
  bytes_[pci::kClassCode + 2] = static_cast<uint8_t>(id.class_code >> 16);
  bytes_[pci::kHeaderType] = 0;  // type 0, single function
  set16(pci::kSubsystemVendorId, id.subsystem_vendor_id);
  set16(pci::kSubsystemId, id.subsystem_id);
  bytes_[pci::kInterruptPin] = id.interrupt_pin;
  bytes_[pci::kInterruptLine] = id.interrupt_line;
  constexpr uint16_t cmd_mask = pci::kCommandIo | pci::kCommandMemory | pci::kCommandBusMaster |
                                pci::kCommandIntxDisable;
  wmask_[pci::kCommand] = cmd_mask & 0xFF;
  wmask_[pci::kCommand + 1] = cmd_mask >> 8;
  wmask_[pci::kInterruptLine] = 0xFF;
}

void PciConfigSpace::declare_bar(const PciBarDecl& bar) {
  const int i = bar.index;
  const uint64_t size = bar.size;
  TERN_CHECK(i >= 0 && i + (bar.is_64bit ? 1 : 0) < pci::kNumBars);
  TERN_CHECK(size >= 16 && (size & (size - 1)) == 0);
  TERN_CHECK(bar.is_64bit || size <= (uint64_t{1} << 31));
  TERN_CHECK(!bar_used_[i] && !(bar.is_64bit && bar_used_[i + 1]));
  bar_used_[i] = true;
  bar_size_[i] = size;
  uint32_t type = pci::kBarMemory32;
  if (bar.is_64bit) type |= pci::kBarMemory64;
  if (bar.prefetchable) type |= pci::kBarPrefetchable;
  const uint32_t off = pci::kBar0 + 4 * i;
  set32(off, type);
  const uint64_t mask = ~(size - 1);
  const auto lo = static_cast<uint32_t>(mask) & pci::kBarMemoryMask;
  for (int b = 0; b < 4; ++b) wmask_[off + b] = static_cast<uint8_t>(lo >> (8 * b));
  if (bar.is_64bit) {
    bar_used_[i + 1] = true;
    set32(off + 4, 0);
    const auto hi = static_cast<uint32_t>(mask >> 32);
    for (int b = 0; b < 4; ++b) wmask_[off + 4 + b] = static_cast<uint8_t>(hi >> (8 * b));
  }
  bars_.push_back(bar);
}

void PciConfigSpace::set_bar_address(int index, uint64_t gpa) {
  auto it = std::find_if(bars_.begin(), bars_.end(),
                         [index](const PciBarDecl& b) { return b.index == index; });
  TERN_CHECK(it != bars_.end() && gpa % it->size == 0);
  TERN_CHECK(it->is_64bit || gpa + it->size <= (uint64_t{1} << 32));
  const uint32_t off = pci::kBar0 + 4 * index;
  set32(off, static_cast<uint32_t>(gpa) | (read32(off) & ~pci::kBarMemoryMask));
  if (it->is_64bit) set32(off + 4, static_cast<uint32_t>(gpa >> 32));
}

void PciConfigSpace::apply_placement(const PciPlacement& p) {
  for (const PciBarDecl& b : bars_) set_bar_address(b.index, p.bar_gpa[b.index]);
  bytes_[pci::kInterruptLine] = p.intx_irq;
  if (p.intx_irq == 0xFF) bytes_[pci::kInterruptPin] = 0;
}

void PciConfigSpace::add_memory_bar(int index, uint32_t size, uint32_t gpa) {
  declare_bar(PciBarDecl{.index = static_cast<uint8_t>(index), .size = size});
  set_bar_address(index, gpa);
}

uint8_t PciConfigSpace::add_capability(uint8_t id, std::span<const uint8_t> body,
                                       std::span<const uint8_t> writable) {
  uint32_t off = next_cap_;
  TERN_CHECK(off + 2 + body.size() <= pci::kConfigSpaceSize);
  bytes_[off] = id;
  bytes_[off + 1] = 0;
  for (size_t i = 0; i < body.size(); ++i) {
    bytes_[off + 2 + i] = body[i];
    wmask_[off + 2 + i] = i < writable.size() ? writable[i] : 0;
  }
  if (last_cap_ == 0) {
    bytes_[pci::kCapabilitiesPointer] = static_cast<uint8_t>(off);
    set16(pci::kStatus, read16(pci::kStatus) | pci::kStatusCapabilities);
  } else {
    bytes_[last_cap_ + 1] = static_cast<uint8_t>(off);
  }
  last_cap_ = static_cast<uint8_t>(off);
  next_cap_ = static_cast<uint8_t>((off + 2 + body.size() + 3) & ~3u);  // dword-aligned
  return static_cast<uint8_t>(off);
}

void PciConfigSpace::read(uint32_t offset, std::span<uint8_t> data) const {
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = offset + i < pci::kConfigSpaceSize ? bytes_[offset + i] : 0xFF;
}

void PciConfigSpace::write(uint32_t offset, std::span<const uint8_t> data) {
  for (size_t i = 0; i < data.size() && offset + i < pci::kConfigSpaceSize; ++i) {
    uint32_t o = offset + static_cast<uint32_t>(i);
    bytes_[o] = static_cast<uint8_t>((bytes_[o] & ~wmask_[o]) | (data[i] & wmask_[o]));
  }
}

std::optional<uint64_t> PciConfigSpace::bar_address(int index) const {
  if (index < 0 || index >= pci::kNumBars || bar_size_[index] == 0) return std::nullopt;
  if (!(command() & pci::kCommandMemory)) return std::nullopt;
  const uint32_t off = pci::kBar0 + 4 * index;
  const uint32_t lo = read32(off);
  uint64_t a = lo & pci::kBarMemoryMask;
  if (lo & pci::kBarMemory64) a |= uint64_t{read32(off + 4)} << 32;
  if (a == 0) return std::nullopt;  // not programmed
  return a;
}

std::vector<PciBarWindow> PciConfigSpace::memory_windows() const {
  std::vector<PciBarWindow> w;
  for (int i = 0; i < pci::kNumBars; ++i)
    if (auto a = bar_address(i)) w.push_back({static_cast<uint8_t>(i), *a, bar_size_[i]});
  return w;
}

uint16_t PciConfigSpace::read16(uint32_t off) const {
  return static_cast<uint16_t>(bytes_[off] | bytes_[off + 1] << 8);
}
uint32_t PciConfigSpace::read32(uint32_t off) const {
  return uint32_t{read16(off)} | uint32_t{read16(off + 2)} << 16;
}
void PciConfigSpace::set16(uint32_t off, uint16_t v) {
  bytes_[off] = static_cast<uint8_t>(v);
  bytes_[off + 1] = static_cast<uint8_t>(v >> 8);
}
void PciConfigSpace::set32(uint32_t off, uint32_t v) {
  set16(off, static_cast<uint16_t>(v));
  set16(off + 2, static_cast<uint16_t>(v >> 16));
}

}  // namespace tern
