#include "devices/pci/pci_root.h"

#include <cstring>

#include "devices/pci/pci_config_space.h"
#include "devices/pci/pci_registers.h"

namespace tern {

namespace {

/// Host bridge at 00:00.0: identification only (no BARs, no capabilities).
class PciHostBridge final : public PciDevice {
 public:
  PciHostBridge()
      : config_(PciIdentity{.vendor_id = 0x1b36,  // Red Hat, Inc.
                            .device_id = 0x0008,  // generic PCIe host bridge
                            .subsystem_vendor_id = 0x1b36,
                            .subsystem_id = 0x0008,
                            .revision = 0,
                            .class_code = 0x060000,  // bridge, host bridge
                            .interrupt_pin = 0,
                            .interrupt_line = 0}) {}
  std::string_view name() const override { return "pci-host-bridge"; }
  void config_read(uint32_t offset, std::span<uint8_t> data) override { config_.read(offset, data); }
  void config_write(uint32_t offset, std::span<const uint8_t> data) override {
    config_.write(offset, data);
  }
  std::vector<PciBarWindow> memory_windows() const override { return {}; }
  void bar_read(uint8_t, uint64_t, std::span<uint8_t> data) override {
    std::memset(data.data(), 0xFF, data.size());
  }
  void bar_write(uint8_t, uint64_t, std::span<const uint8_t>) override {}

 private:
  PciConfigSpace config_;
};

}  // namespace

class PciRoot::ConfigPort final : public BusDevice {
 public:
  explicit ConfigPort(PciRoot& root) : root_(root) {}
  std::string_view name() const override { return "pci-config"; }
  void read(uint64_t offset, std::span<uint8_t> data) override {
    if (offset == 0 && data.size() == 4) {
      std::lock_guard lock(root_.config_mu_);
      uint32_t a = root_.config_address_;
      std::memcpy(data.data(), &a, 4);
      return;
    }
    std::memset(data.data(), 0xFF, data.size());
    if (is_reset_control(offset, data.size())) {
      root_.reset_control_->read(0, data);
      return;
    }
    if (offset < pci::kConfigDataOffset) return;  // other bytes of 0xCF8-0xCFB: nothing there
    uint32_t addr;
    {
      std::lock_guard lock(root_.config_mu_);
      addr = root_.config_address_;
    }
    access(addr, offset - pci::kConfigDataOffset, data, {}, false);
  }
  void write(uint64_t offset, std::span<const uint8_t> data) override {
    if (offset == 0 && data.size() == 4) {
      std::lock_guard lock(root_.config_mu_);
      std::memcpy(&root_.config_address_, data.data(), 4);
      return;
    }
    if (is_reset_control(offset, data.size())) {
      root_.reset_control_->write(0, data);
      return;
    }
    if (offset < pci::kConfigDataOffset) return;  // other bytes of 0xCF8-0xCFB: dropped
    uint32_t addr;
    {
      std::lock_guard lock(root_.config_mu_);
      addr = root_.config_address_;
    }
    access(addr, offset - pci::kConfigDataOffset, {}, data, true);
  }

 private:
  /// A one-byte access to 0xCF9 is the Reset Control register when the platform has one (PCI
  /// 3.0 §3.2.2.3.2: only dword accesses to 0xCF8 are CONFIG_ADDRESS; others are plain I/O).
  bool is_reset_control(uint64_t offset, size_t len) const {
    return offset == 1 && len == 1 && root_.reset_control_;
  }
  void access(uint32_t addr, uint64_t byte, std::span<uint8_t> rd, std::span<const uint8_t> wr,
              bool write) {
    if (!(addr & pci::kConfigAddressEnable)) return;
    uint8_t bus = static_cast<uint8_t>(addr >> 16);
    uint8_t slot = (addr >> 11) & 0x1F;
    uint8_t fn = (addr >> 8) & 0x7;
    uint32_t reg = (addr & 0xFC) + static_cast<uint32_t>(byte);
    size_t len = write ? wr.size() : rd.size();
    if (bus != 0 || byte + len > 4) return;
    if (write)
      root_.config_write(slot, fn, reg, wr);
    else
      root_.config_read(slot, fn, reg, rd);
  }
  PciRoot& root_;
};

class PciRoot::MmioWindow final : public BusDevice {
 public:
  explicit MmioWindow(PciRoot& root) : root_(root) {}
  std::string_view name() const override { return "pci-mmio"; }
  void read(uint64_t offset, std::span<uint8_t> data) override {
    root_.mmio_access(root_.mmio_base_ + offset, data, {}, false);
  }
  void write(uint64_t offset, std::span<const uint8_t> data) override {
    root_.mmio_access(root_.mmio_base_ + offset, {}, data, true);
  }

 private:
  PciRoot& root_;
};

PciRoot::PciRoot(uint64_t mmio_base, uint64_t mmio_size)
    : mmio_base_(mmio_base), mmio_size_(mmio_size), next_mmio_(mmio_base) {
  slots_[0] = std::make_shared<PciHostBridge>();
  config_port_ = std::make_shared<ConfigPort>(*this);
  mmio_window_ = std::make_shared<MmioWindow>(*this);
}

PciRoot::~PciRoot() = default;

std::optional<uint8_t> PciRoot::next_free_slot() const {
  for (uint8_t s = 1; s < slots_.size(); ++s) {
    bool taken = slots_[s] != nullptr;
    for (const auto& f : more_functions_[s]) taken = taken || f != nullptr;
    if (!taken) return s;
  }
  return std::nullopt;
}

Result<uint8_t> PciRoot::add(std::shared_ptr<PciDevice> dev) {
  const auto s = next_free_slot();
  if (!s) return fail("PCI bus 0", "all 31 device slots are in use");
  slots_[*s] = std::move(dev);
  refresh_mappings();
  return *s;
}

Result<void> PciRoot::add_function(uint8_t slot, uint8_t function,
                                   std::shared_ptr<PciDevice> dev) {
  const std::string where = "PCI 00:" + std::to_string(slot) + "." + std::to_string(function);
  if (slot >= slots_.size() || function > 7) return fail(where, "no such slot or function");
  if (slot == 0 && function == 0) return fail(where, "is the host bridge (set_host_bridge)");
  if (function_at(slot, function) != nullptr) return fail(where, "already in use");
  if (function == 0)
    slots_[slot] = std::move(dev);
  else
    more_functions_[slot][function - 1] = std::move(dev);
  refresh_mappings();
  return {};
}

void PciRoot::set_host_bridge(std::shared_ptr<PciDevice> bridge) {
  std::lock_guard lock(config_mu_);
  slots_[0] = std::move(bridge);
}

void PciRoot::set_reset_control(std::shared_ptr<BusDevice> rc) { reset_control_ = std::move(rc); }

PciDevice* PciRoot::function_at(uint8_t slot, uint8_t function) const {
  if (slot >= slots_.size() || function > 7) return nullptr;
  if (function == 0) return slots_[slot].get();
  return more_functions_[slot][function - 1].get();
}

Result<uint64_t> PciRoot::allocate_mmio(uint64_t size) {
  if (size == 0 || (size & (size - 1)) != 0) return fail("PCI BAR", "size not a power of two");
  uint64_t at = (next_mmio_ + size - 1) & ~(size - 1);
  if (at + size > mmio_base_ + mmio_size_ || at + size < at)
    return fail("PCI MMIO window", "out of space for a " + std::to_string(size) + "-byte BAR");
  next_mmio_ = at + size;
  return at;
}

Result<PciPlacement> PciRoot::allocate_bars(const std::vector<PciBarDecl>& bars) {
  PciPlacement p;
  for (const PciBarDecl& b : bars) {
    auto gpa = allocate_mmio(b.size);
    if (!gpa) return fail("BAR " + std::to_string(b.index), gpa.error().message());
    p.bar_gpa[b.index] = *gpa;
  }
  return p;
}

Result<void> PciRoot::attach(Bus& pio, Bus& mmio) {
  TRY(pio.insert(config_port_, pci::kConfigAddressPort, pci::kConfigPortCount));
  TRY(mmio.insert(mmio_window_, mmio_base_, mmio_size_));
  return {};
}

void PciRoot::config_read(uint8_t slot, uint8_t function, uint32_t offset,
                          std::span<uint8_t> data) {
  std::memset(data.data(), 0xFF, data.size());
  if (offset + data.size() > pci::kConfigSpaceSize) return;
  std::lock_guard lock(config_mu_);
  PciDevice* dev = function_at(slot, function);
  if (dev == nullptr) return;
  dev->config_read(offset, data);
  // Header type bit 7 (PCI 3.0 §6.2.1): function 0 of a slot with more functions says so.
  if (function == 0 && pci::kHeaderType >= offset && pci::kHeaderType < offset + data.size()) {
    bool more = false;
    for (const auto& f : more_functions_[slot]) more = more || f != nullptr;
    if (more) data[pci::kHeaderType - offset] |= pci::kHeaderTypeMultiFunction;
  }
}

void PciRoot::config_write(uint8_t slot, uint8_t function, uint32_t offset,
                           std::span<const uint8_t> data) {
  if (offset + data.size() > pci::kConfigSpaceSize) return;
  std::lock_guard lock(config_mu_);
  PciDevice* dev = function_at(slot, function);
  if (dev == nullptr) return;
  dev->config_write(offset, data);
  refresh_mappings();
}

void PciRoot::refresh_mappings() {
  // Ask the devices first (their own locks), then swap the table: never both locks at once.
  std::vector<Mapping> m;
  for (uint8_t s = 0; s < slots_.size(); ++s) {
    for (uint8_t f = 0; f < 8; ++f) {
      PciDevice* d = function_at(s, f);
      if (d == nullptr) continue;
      for (const auto& w : d->memory_windows()) m.push_back({w.gpa, w.size, w.bar, s, d});
    }
  }
  std::unique_lock lock(map_mu_);
  mappings_ = std::move(m);
}

void PciRoot::mmio_access(uint64_t gpa, std::span<uint8_t> rd, std::span<const uint8_t> wr,
                          bool write) {
  size_t len = write ? wr.size() : rd.size();
  {
    std::shared_lock lock(map_mu_);
    for (const auto& m : mappings_) {
      if (gpa < m.gpa || gpa - m.gpa >= m.size || gpa - m.gpa + len > m.size) continue;
      DeviceAccessCounters& c = bar_access_[m.slot];
      (write ? c.writes : c.reads).fetch_add(1, std::memory_order_relaxed);
      if (write)
        m.dev->bar_write(m.bar, gpa - m.gpa, wr);
      else
        m.dev->bar_read(m.bar, gpa - m.gpa, rd);
      return;
    }
  }
  stray_mmio_.fetch_add(1, std::memory_order_relaxed);
  if (!write) std::memset(rd.data(), 0xFF, rd.size());
  TERN_LOG_RATELIMITED(log_limit_, debug, "pci-mmio: {} of {} bytes at {:#x} hits no BAR",
                       write ? "write" : "read", len, gpa);
}

}  // namespace tern
