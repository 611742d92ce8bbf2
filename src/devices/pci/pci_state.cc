// Snapshot save/restore of PciConfigSpace, MsixTable and PciRoot.
#include <algorithm>
#include <cstring>

#include "devices/device_state.h"
#include "devices/pci/msix_table.h"
#include "devices/pci/pci_config_space.h"
#include "devices/pci/pci_registers.h"
#include "devices/pci/pci_root.h"

namespace tern {

using devstate::bad_field;
using devstate::named;

namespace {
std::string hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "%#llx", static_cast<unsigned long long>(v));
  return b;
}
}  // namespace

// ---- PciConfigSpace ----

void PciConfigSpace::save_state(snap::ByteWriter& w) const { w.bytes(bytes_); }

Result<void> PciConfigSpace::restore_state(snap::ByteReader& r, std::string_view device) {
  ASSIGN_OR_RETURN(auto saved, named(device, "pci config space", r.bytes(bytes_.size())));
  for (size_t i = 0; i < bytes_.size(); ++i) {
    if ((saved[i] ^ bytes_[i]) & ~wmask_[i])
      return bad_field(device, "pci config space",
                       "read-only bits differ at offset " + hex(i) + " (saved " + hex(saved[i]) +
                           ", device " + hex(bytes_[i]) + ")");
  }
  std::copy(saved.begin(), saved.end(), bytes_.begin());
  return {};
}

// ---- MsixTable ----

void MsixTable::save_state(snap::ByteWriter& w) const {
  std::lock_guard lock(mu_);
  w.u16(size());
  for (const Entry& e : entries_) {
    w.u32(e.addr_lo);
    w.u32(e.addr_hi);
    w.u32(e.data);
    w.u32(e.control);
    w.boolean(e.pending);
  }
}

Result<void> MsixTable::restore_state(snap::ByteReader& r, std::string_view device) {
  ASSIGN_OR_RETURN(uint16_t n, named(device, "msix table size", r.u16()));
  if (n != size())
    return bad_field(device, "msix table size",
                     std::to_string(n) + " vectors saved, device has " + std::to_string(size()));
  struct Saved {
    uint32_t addr_lo, addr_hi, data, control;
    bool pending;
  };
  std::vector<Saved> saved(n);
  for (uint16_t v = 0; v < n; ++v) {
    Saved& s = saved[v];
    std::string field = "msix vector " + std::to_string(v);
    ASSIGN_OR_RETURN(s.addr_lo, named(device, field, r.u32()));
    ASSIGN_OR_RETURN(s.addr_hi, named(device, field, r.u32()));
    ASSIGN_OR_RETURN(s.data, named(device, field, r.u32()));
    ASSIGN_OR_RETURN(s.control, named(device, field, r.u32()));
    ASSIGN_OR_RETURN(s.pending, named(device, field, r.boolean()));
    if (s.control & ~pci::kMsixVectorMasked)
      return bad_field(device, field, "vector control " + hex(s.control) + " has reserved bits");
  }
  std::lock_guard lock(mu_);
  for (uint16_t v = 0; v < n; ++v) {
    Entry& e = entries_[v];
    const Saved& s = saved[v];
    e.addr_lo = s.addr_lo;
    e.addr_hi = s.addr_hi;
    e.data = s.data;
    e.control = s.control;
    e.pending = s.pending;
    // A masked vector gets its route when the guest unmasks it (table_write), as live.
    if (!(e.control & pci::kMsixVectorMasked)) route_locked(e);
  }
  notify_locked();
  return {};
}

// ---- PciRoot ----

namespace {
constexpr uint32_t kRootVersion = 1;
constexpr std::string_view kRoot = "pci-root";
}  // namespace

void PciRoot::save_state(snap::ByteWriter& w) const {
  std::lock_guard lock(config_mu_);
  w.u32(kRootVersion);
  w.u32(config_address_);
  uint8_t cfg[pci::kConfigSpaceSize];
  for (uint32_t off = 0; off < pci::kConfigSpaceSize; off += 4)
    slots_[0]->config_read(off, std::span<uint8_t>(cfg + off, 4));
  w.bytes(cfg);
}

Result<void> PciRoot::restore_state(snap::ByteReader& r) {
  TRY(devstate::expect_version(r, kRoot, kRootVersion));
  ASSIGN_OR_RETURN(uint32_t address, named(kRoot, "config address", r.u32()));
  ASSIGN_OR_RETURN(auto saved, named(kRoot, "host bridge config space",
                                     r.bytes(pci::kConfigSpaceSize)));
  std::lock_guard lock(config_mu_);
  // The host bridge's writable registers are the command register and the interrupt line: the
  // rest must match, and those are written the guest's way and must read back as saved.
  uint8_t cfg[pci::kConfigSpaceSize];
  for (uint32_t off = 0; off < pci::kConfigSpaceSize; off += 4)
    slots_[0]->config_read(off, std::span<uint8_t>(cfg + off, 4));
  const uint32_t writable[] = {pci::kCommand, pci::kCommand + 1, pci::kInterruptLine};
  // The standard header only: device-specific registers (40h-FFh, e.g. the i440FX's PAM and
  // SMRAM) are the bridge's own state, saved and restored by its owner (PcChipset).
  for (uint32_t off = 0; off < pci::kFirstCapability; ++off) {
    if (std::find(std::begin(writable), std::end(writable), off) != std::end(writable)) continue;
    if (cfg[off] != saved[off])
      return bad_field(kRoot, "host bridge config space", "read-only byte differs at " + hex(off));
  }
  for (uint32_t off : writable) {
    uint8_t old = cfg[off];
    slots_[0]->config_write(off, saved.subspan(off, 1));
    slots_[0]->config_read(off, std::span<uint8_t>(cfg + off, 1));
    if (cfg[off] != saved[off]) {
      slots_[0]->config_write(off, std::span<const uint8_t>(&old, 1));
      return bad_field(kRoot, "host bridge config space",
                       "offset " + hex(off) + " cannot hold " + hex(saved[off]));
    }
  }
  config_address_ = address;
  return {};
}

}  // namespace tern
