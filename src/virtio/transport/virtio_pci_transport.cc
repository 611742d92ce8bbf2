#include "virtio/transport/virtio_pci_transport.h"

#include <fcntl.h>
#include <sys/eventfd.h>

#include <cstring>

#include "devices/pci/pci_registers.h"
#include "virtio/transport/virtio_pci_registers.h"
#include "virtio/virtio_spec.h"

namespace tern {

namespace vp = virtio_pci;

namespace {

uint64_t load_le(std::span<const uint8_t> d) {
  uint64_t v = 0;
  for (size_t i = 0; i < d.size() && i < 8; ++i) v |= uint64_t{d[i]} << (8 * i);
  return v;
}

void store_le(std::span<uint8_t> d, uint64_t v) {
  for (size_t i = 0; i < d.size(); ++i) d[i] = i < 8 ? static_cast<uint8_t>(v >> (8 * i)) : 0;
}

/// Body (after cap_vndr, cap_next) of a struct virtio_pci_cap.
std::vector<uint8_t> virtio_cap(uint8_t cfg_type, uint8_t bar, uint32_t offset, uint32_t length,
                                uint32_t cap_len) {
  std::vector<uint8_t> b(cap_len - 2, 0);
  b[vp::kCapLen - 2] = static_cast<uint8_t>(cap_len);
  b[vp::kCapCfgType - 2] = cfg_type;
  b[vp::kCapBar - 2] = bar;
  store_le(std::span<uint8_t>(b).subspan(vp::kCapOffset - 2, 4), offset);
  store_le(std::span<uint8_t>(b).subspan(vp::kCapLength - 2, 4), length);
  return b;
}

uint32_t class_code_for(uint32_t device_type) {
  switch (device_type) {
    case 1: return 0x020000;  // network controller, Ethernet
    case 2: return 0x018000;  // mass storage, other
    case 3: return 0x078000;  // communication controller, other
    default: return 0xFF0000;
  }
}

bool is_pow2(uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }

}  // namespace

Result<std::shared_ptr<VirtioPciTransport>> VirtioPciTransport::create(
    std::shared_ptr<VirtioDevice> device, const GuestMemory& mem, PciPlatform& platform,
    DeviceActivator* activator) {
  const uint16_t nq = device->num_queues();
  if (nq == 0 || nq > vp::kMaxQueues)
    return fail(std::string(device->name()), std::to_string(nq) + " queues (1..127 supported)");
  if (!is_pow2(device->max_queue_size()))
    return fail(std::string(device->name()), "max queue size not a power of two");
  PciIdentity id{.vendor_id = vp::kVendorId,
                 .device_id = static_cast<uint16_t>(vp::kModernDeviceBase + device->device_type()),
                 .subsystem_vendor_id = vp::kVendorId,
                 .subsystem_id = 0x40,  // §4.1.2.1: ≥ 0x40 for modern-only devices
                 .revision = vp::kRevision,
                 .class_code = class_code_for(device->device_type()),
                 .interrupt_pin = 1,  // INTA#; reads 0 if placed with INTx not wired
                 .interrupt_line = 0xFF};
  auto t = std::shared_ptr<VirtioPciTransport>(
      new VirtioPciTransport(std::move(device), mem, platform, activator, id));
  ASSIGN_OR_RETURN(auto msix, MsixTable::create(static_cast<uint16_t>(nq + 1), platform));
  t->interrupt_ = std::make_shared<VirtioPciInterrupt>(std::move(msix), platform, 0xFF, nq);
  for (uint16_t q = 0; q < nq; ++q) {
    ASSIGN_OR_RETURN(UniqueFd fd, make_eventfd(0, EFD_NONBLOCK));
    t->kicks_.push_back(std::move(fd));
    t->queues_.push_back(Queue{{t->device_->max_queue_size(), 0, 0, 0, false, {}}, q});
  }

  PciConfigSpace& c = t->config_;
  c.declare_bar(PciBarDecl{.index = vp::kVirtioBar, .size = vp::kVirtioBarSize});
  c.declare_bar(PciBarDecl{.index = vp::kMsixBar, .size = vp::kMsixBarSize});
  // MSI-X (PCI 3.0 §6.8.2): nq + 1 vectors, table and PBA in BAR1.
  t->msix_cap_ = MsixCapability::add(c, MsixLayout{.vectors = static_cast<uint16_t>(nq + 1),
                                                   .table_bar = vp::kMsixBar,
                                                   .table_offset = vp::kMsixTableOffset,
                                                   .pba_bar = vp::kMsixBar,
                                                   .pba_offset = vp::kMsixPbaOffset});
  auto add_virtio = [&c](const std::vector<uint8_t>& body, std::span<const uint8_t> w = {}) {
    return c.add_capability(pci::kCapVendorSpecific, body, w);
  };
  add_virtio(virtio_cap(vp::VIRTIO_PCI_CAP_COMMON_CFG, vp::kVirtioBar, vp::kCommonCfgOffset,
                        vp::kCommonCfgSize, vp::kCapSize));
  auto notify = virtio_cap(vp::VIRTIO_PCI_CAP_NOTIFY_CFG, vp::kVirtioBar, vp::kNotifyOffset,
                           nq * vp::kNotifyOffMultiplier, vp::kNotifyCapSize);
  store_le(std::span<uint8_t>(notify).subspan(vp::kCapSize - 2, 4), vp::kNotifyOffMultiplier);
  add_virtio(notify);
  add_virtio(virtio_cap(vp::VIRTIO_PCI_CAP_ISR_CFG, vp::kVirtioBar, vp::kIsrOffset, vp::kIsrSize,
                        vp::kCapSize));
  add_virtio(virtio_cap(vp::VIRTIO_PCI_CAP_DEVICE_CFG, vp::kVirtioBar, vp::kDeviceCfgOffset,
                        vp::kDeviceCfgSize, vp::kCapSize));
  // VIRTIO_PCI_CAP_PCI_CFG (§4.1.4.9): bar, offset, length and the data window are writable.
  auto pcicfg = virtio_cap(vp::VIRTIO_PCI_CAP_PCI_CFG, 0, 0, 0, vp::kPciCfgCapSize);
  std::vector<uint8_t> pcicfg_w(pcicfg.size(), 0);
  pcicfg_w[vp::kCapBar - 2] = 0xFF;
  for (uint32_t i = vp::kCapOffset - 2; i < vp::kPciCfgCapSize - 2; ++i) pcicfg_w[i] = 0xFF;
  t->pci_cfg_cap_ = add_virtio(pcicfg, pcicfg_w);
  return t;
}

Result<std::shared_ptr<VirtioPciTransport>> VirtioPciTransport::create(
    std::shared_ptr<VirtioDevice> device, const GuestMemory& mem, PciPlatform& platform,
    const VirtioPciPlacement& placement) {
  ASSIGN_OR_RETURN(auto t, create(std::move(device), mem, platform, nullptr));
  PciPlacement p;
  p.bar_gpa[vp::kVirtioBar] = placement.virtio_bar_gpa;
  p.bar_gpa[vp::kMsixBar] = placement.msix_bar_gpa;
  p.intx_irq = placement.intx_irq;
  TRY(t->place(p));
  return t;
}

VirtioPciTransport::VirtioPciTransport(std::shared_ptr<VirtioDevice> device,
                                       const GuestMemory& mem, PciPlatform& platform,
                                       DeviceActivator* activator, PciIdentity id)
    : device_(std::move(device)),
      mem_(mem),
      platform_(platform),
      activator_(activator),
      config_(id) {}

VirtioPciTransport::~VirtioPciTransport() {
  std::lock_guard lock(mu_);
  // Teardown: the control thread (or a test) destroys the bus after the vCPUs are joined, so the
  // reset runs here directly, not through the activator.
  if (activated_) device_->reset();
  activated_ = false;
  if (notify_gpa_) {
    for (size_t q = 0; q < kicks_.size(); ++q)
      (void)platform_.set_ioeventfd(*notify_gpa_ + q * vp::kNotifyOffMultiplier,
                                    vp::kNotifyAccessBytes, kicks_[q].borrow(), false);
  }
}

std::vector<PciBarDecl> VirtioPciTransport::bars() const {
  std::lock_guard lock(mu_);
  return config_.bar_declarations();
}

Result<void> VirtioPciTransport::place(const PciPlacement& placement) {
  std::lock_guard lock(mu_);
  config_.apply_placement(placement);
  interrupt_->set_intx_irq(placement.intx_irq);
  move_ioeventfds_locked();  // nothing is decoded yet (memory space off): no-op, kept for symmetry
  return {};
}

DeviceCounters VirtioPciTransport::counters() const {
  DeviceCounters c = device_->counters();
  if (c.name.empty()) c.name = std::string(device_->name());
  if (c.kind.empty()) c.kind = std::string(device_->kind());
  c.counters.emplace_back("protocol_errors", protocol_errors());
  c.counters.emplace_back("interrupts_sent", interrupt_->interrupts_sent());
  c.counters.emplace_back("config_interrupts", interrupt_->config_interrupts());
  return c;
}

// ---- PCI configuration space ----

void VirtioPciTransport::config_read(uint32_t offset, std::span<uint8_t> data) {
  std::lock_guard lock(mu_);
  uint32_t window = pci_cfg_cap_ + vp::kPciCfgData;
  if (pci_cfg_cap_ && offset >= window && offset < window + 4) {
    pci_cfg_access_locked(false, data);
    return;
  }
  config_.read(offset, data);
}

void VirtioPciTransport::config_write(uint32_t offset, std::span<const uint8_t> data) {
  std::lock_guard lock(mu_);
  uint32_t window = pci_cfg_cap_ + vp::kPciCfgData;
  if (pci_cfg_cap_ && offset >= window && offset < window + 4) {
    std::vector<uint8_t> d(data.begin(), data.end());
    pci_cfg_access_locked(true, d);
    return;
  }
  uint16_t old_cmd = config_.command();
  config_.write(offset, data);
  uint16_t cmd = config_.command();
  if ((old_cmd ^ cmd) & pci::kCommandIntxDisable)
    interrupt_->set_intx_disabled(cmd & pci::kCommandIntxDisable);
  msix_cap_.sync(config_, interrupt_->msix());
  move_ioeventfds_locked();
}

void VirtioPciTransport::pci_cfg_access_locked(bool write, std::span<uint8_t> data) {
  // §4.1.4.9.1: the access goes to cap.bar at cap.offset, cap.length (1, 2 or 4) bytes wide.
  uint8_t bar = config_.read8(pci_cfg_cap_ + vp::kCapBar);
  uint32_t off = config_.read32(pci_cfg_cap_ + vp::kCapOffset);
  uint32_t len = config_.read32(pci_cfg_cap_ + vp::kCapLength);
  if ((len != 1 && len != 2 && len != 4) || off % len != 0 || data.size() < len) {
    // A read of a window never set up (cap.length 0) is what a dump of the whole configuration
    // space does (lspci -xxx, sysfs `config`): zeros, not a driver error.
    if (!write && len == 0) {
      std::memset(data.data(), 0, data.size());
      return;
    }
    protocol_error("VIRTIO_PCI_CAP_PCI_CFG access", off, len);
    if (!write) std::memset(data.data(), 0, data.size());
    return;
  }
  std::span<uint8_t> d = data.first(len);
  if (bar == vp::kVirtioBar) {
    if (write)
      virtio_bar_write_locked(off, d);
    else
      virtio_bar_read_locked(off, d);
  } else if (bar == vp::kMsixBar) {
    if (write)
      msix_bar_write(off, d);
    else
      msix_bar_read(off, d);
  } else if (!write) {
    std::memset(d.data(), 0, d.size());
  }
  if (!write && data.size() > len) std::memset(data.data() + len, 0, data.size() - len);
}

std::vector<PciBarWindow> VirtioPciTransport::memory_windows() const {
  std::lock_guard lock(mu_);
  return config_.memory_windows();
}

void VirtioPciTransport::move_ioeventfds_locked() {
  std::optional<uint64_t> bar = config_.bar_address(vp::kVirtioBar);
  std::optional<uint64_t> want;
  if (bar) want = *bar + vp::kNotifyOffset;
  if (want == notify_gpa_) return;
  for (size_t q = 0; q < kicks_.size(); ++q) {
    uint64_t step = q * vp::kNotifyOffMultiplier;
    if (notify_gpa_) {
      auto r = platform_.set_ioeventfd(*notify_gpa_ + step, vp::kNotifyAccessBytes,
                                       kicks_[q].borrow(), false);
      if (!r) TERN_LOG_RATELIMITED(log_limit_, warn, "{}: {}", name(), r.error().message());
    }
    if (want) {
      // On failure the kick still works, through a userspace MMIO exit (bar_write).
      auto r =
          platform_.set_ioeventfd(*want + step, vp::kNotifyAccessBytes, kicks_[q].borrow(), true);
      if (!r) TERN_LOG_RATELIMITED(log_limit_, warn, "{}: {}", name(), r.error().message());
    }
  }
  notify_gpa_ = want;
}

// ---- BARs ----

void VirtioPciTransport::bar_read(uint8_t bar, uint64_t offset, std::span<uint8_t> data) {
  std::memset(data.data(), 0, data.size());
  if (bar == vp::kMsixBar) return msix_bar_read(offset, data);
  if (bar != vp::kVirtioBar) return;
  std::lock_guard lock(mu_);
  virtio_bar_read_locked(offset, data);
}

void VirtioPciTransport::bar_write(uint8_t bar, uint64_t offset, std::span<const uint8_t> data) {
  if (bar == vp::kMsixBar) return msix_bar_write(offset, data);
  if (bar != vp::kVirtioBar) return;
  std::lock_guard lock(mu_);
  virtio_bar_write_locked(offset, data);
}

void VirtioPciTransport::msix_bar_read(uint64_t offset, std::span<uint8_t> data) {
  (void)msix_cap_.bar_read(interrupt_->msix(), vp::kMsixBar, offset, data);  // else reads 0
}

void VirtioPciTransport::virtio_bar_read_locked(uint64_t offset, std::span<uint8_t> data) {
  std::memset(data.data(), 0, data.size());
  if (offset < vp::kCommonCfgOffset + vp::kCommonCfgSize) {
    common_read(offset - vp::kCommonCfgOffset, data);
  } else if (offset == vp::kIsrOffset) {
    data[0] = interrupt_->read_and_clear_isr();
  } else if (offset >= vp::kDeviceCfgOffset && offset < vp::kDeviceCfgOffset + vp::kDeviceCfgSize) {
    device_->read_config(offset - vp::kDeviceCfgOffset, data);
  }
}

void VirtioPciTransport::msix_bar_write(uint64_t offset, std::span<const uint8_t> data) {
  if (!msix_cap_.bar_write(interrupt_->msix(), vp::kMsixBar, offset, data))
    protocol_error("write outside the MSI-X table", offset, load_le(data));
}

void VirtioPciTransport::virtio_bar_write_locked(uint64_t offset, std::span<const uint8_t> data) {
  if (offset >= vp::kNotifyOffset &&
      offset < vp::kNotifyOffset + kicks_.size() * vp::kNotifyOffMultiplier) {
    // A notification KVM did not catch as an ioeventfd (other width, or none registered).
    uint64_t one = 1;
    size_t q = (offset - vp::kNotifyOffset) / vp::kNotifyOffMultiplier;
    [[maybe_unused]] ssize_t n = ::write(kicks_[q].get(), &one, sizeof one);
    return;
  }
  if (offset < vp::kCommonCfgOffset + vp::kCommonCfgSize) {
    common_write(offset - vp::kCommonCfgOffset, data);
  } else if (offset >= vp::kDeviceCfgOffset && offset < vp::kDeviceCfgOffset + vp::kDeviceCfgSize) {
    device_->write_config(offset - vp::kDeviceCfgOffset, data);
  } else {
    protocol_error("write to a read-only or unimplemented BAR0 offset", offset, load_le(data));
  }
}

// ---- common configuration (§4.1.4.3) ----

void VirtioPciTransport::common_read(uint64_t offset, std::span<uint8_t> data) {
  uint8_t cfg[vp::kCommonCfgSize] = {};
  auto put = [&cfg](uint32_t at, uint64_t v, size_t n) {
    store_le(std::span<uint8_t>(cfg + at, n), v);
  };
  uint64_t dev_features = device_->device_features();
  put(vp::kDeviceFeatureSelect, device_feature_select_, 4);
  put(vp::kDeviceFeature,
      device_feature_select_ < 2 ? (dev_features >> (32 * device_feature_select_)) & 0xFFFFFFFF
                                 : 0,
      4);
  put(vp::kDriverFeatureSelect, driver_feature_select_, 4);
  put(vp::kDriverFeature,
      driver_feature_select_ < 2 ? (driver_features_ >> (32 * driver_feature_select_)) & 0xFFFFFFFF
                                 : 0,
      4);
  put(vp::kConfigMsixVector, interrupt_->config_vector(), 2);
  put(vp::kNumQueues, queues_.size(), 2);
  put(vp::kDeviceStatus, status_ | (interrupt_->needs_reset() ? vp::DEVICE_NEEDS_RESET : 0), 1);
  put(vp::kConfigGeneration, config_generation_, 1);
  put(vp::kQueueSelect, queue_select_, 2);
  if (queue_select_ < queues_.size()) {
    const Queue& q = queues_[queue_select_];
    put(vp::kQueueSize, q.config.size, 2);
    put(vp::kQueueMsixVector, interrupt_->queue_vector(queue_select_), 2);
    put(vp::kQueueEnable, q.config.enabled ? 1 : 0, 2);
    put(vp::kQueueNotifyOff, q.notify_off, 2);
    put(vp::kQueueDesc, q.config.desc_gpa, 8);
    put(vp::kQueueDriver, q.config.avail_gpa, 8);
    put(vp::kQueueDevice, q.config.used_gpa, 8);
  }  // else: queue_size 0 says "no such queue" (§4.1.4.3.1)
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = offset + i < vp::kCommonCfgSize ? cfg[offset + i] : 0;
}

void VirtioPciTransport::common_write(uint64_t offset, std::span<const uint8_t> data) {
  const size_t n = data.size();
  const uint64_t v = load_le(data);
  auto field = [&](uint32_t at, size_t width) { return offset == at && n == width; };
  // 64-bit queue addresses may be written as two 32-bit halves (§4.1.3.1).
  auto addr_field = [&](uint32_t at) {
    return (offset == at && (n == 8 || n == 4)) || (offset == at + 4 && n == 4);
  };
  if (field(vp::kDeviceFeatureSelect, 4)) {
    device_feature_select_ = static_cast<uint32_t>(v);
  } else if (field(vp::kDriverFeatureSelect, 4)) {
    driver_feature_select_ = static_cast<uint32_t>(v);
  } else if (field(vp::kDriverFeature, 4)) {
    bool negotiating = (status_ & vp::DRIVER) && !(status_ & vp::FEATURES_OK);
    if (!negotiating || driver_feature_select_ > 1)
      return protocol_error("driver_feature write outside feature negotiation", offset, v);
    unsigned shift = 32 * driver_feature_select_;
    driver_features_ = (driver_features_ & ~(uint64_t{0xFFFFFFFF} << shift)) | (v << shift);
  } else if (field(vp::kConfigMsixVector, 2)) {
    interrupt_->set_config_vector(static_cast<uint16_t>(v));
  } else if (field(vp::kDeviceStatus, 1)) {
    write_status(static_cast<uint8_t>(v));
  } else if (field(vp::kQueueSelect, 2)) {
    queue_select_ = static_cast<uint16_t>(v);
  } else if (field(vp::kQueueSize, 2) || field(vp::kQueueMsixVector, 2) ||
             field(vp::kQueueEnable, 2) || addr_field(vp::kQueueDesc) ||
             addr_field(vp::kQueueDriver) || addr_field(vp::kQueueDevice)) {
    if (queue_select_ >= queues_.size())
      return protocol_error("queue write with queue_select out of range", offset, queue_select_);
    if (status_ & vp::DRIVER_OK)
      return protocol_error("queue write after DRIVER_OK", offset, v);
    Queue& q = queues_[queue_select_];
    if (q.config.enabled) return protocol_error("queue write to an enabled queue", offset, v);
    if (field(vp::kQueueSize, 2)) {
      if (!is_pow2(static_cast<uint32_t>(v)) || v > device_->max_queue_size())
        return protocol_error("queue_size not a power of two or above the maximum", offset, v);
      q.config.size = static_cast<uint16_t>(v);
    } else if (field(vp::kQueueMsixVector, 2)) {
      interrupt_->set_queue_vector(queue_select_, static_cast<uint16_t>(v));
    } else if (field(vp::kQueueEnable, 2)) {
      if (v != 1) return protocol_error("queue_enable write other than 1", offset, v);
      // §2.7: descriptor table 16-byte, available ring 2-byte, used ring 4-byte aligned.
      if (q.config.desc_gpa % 16 || q.config.avail_gpa % 2 || q.config.used_gpa % 4)
        return protocol_error("queue_enable with misaligned ring addresses", offset,
                              q.config.desc_gpa);
      q.config.enabled = true;
    } else {
      uint64_t* target = offset < vp::kQueueDriver   ? &q.config.desc_gpa
                         : offset < vp::kQueueDevice ? &q.config.avail_gpa
                                                     : &q.config.used_gpa;
      if (n == 8) {
        *target = v;
      } else {
        unsigned shift = (offset % 8) ? 32 : 0;
        *target = (*target & ~(uint64_t{0xFFFFFFFF} << shift)) | (v << shift);
      }
    }
  } else {
    protocol_error("write to a read-only field or with the wrong width", offset, v);
  }
}

void VirtioPciTransport::write_status(uint8_t v) {
  if (v == 0) {
    reset_locked();
    return;
  }
  if ((status_ & ~v) != 0) return protocol_error("device_status write clears bits", 0x14, v);
  uint8_t added = static_cast<uint8_t>(v & ~status_);
  if (added & vp::DEVICE_NEEDS_RESET) {
    protocol_error("driver set DEVICE_NEEDS_RESET", 0x14, v);
    v &= static_cast<uint8_t>(~vp::DEVICE_NEEDS_RESET);
    added &= static_cast<uint8_t>(~vp::DEVICE_NEEDS_RESET);
  }
  if (added & vp::FEATURES_OK) {
    uint64_t offered = device_->device_features();
    bool ok = (status_ & vp::DRIVER) && (driver_features_ & ~offered) == 0 &&
              (driver_features_ & virtio::feature(virtio::VIRTIO_F_VERSION_1));
    if (!ok) {
      // §3.1.1: leave FEATURES_OK clear; the driver re-reads the status and gives up.
      protocol_error("FEATURES_OK with features not offered or without VERSION_1", 0x14,
                     driver_features_);
      v &= static_cast<uint8_t>(~vp::FEATURES_OK);
    } else if (auto c = device_->check_features(driver_features_); !c) {
      std::string what = "FEATURES_OK refused: " + c.error().message();
      protocol_error(what.c_str(), 0x14, driver_features_);
      v &= static_cast<uint8_t>(~vp::FEATURES_OK);
    }
  }
  status_ = v;
  if (added & vp::DRIVER_OK) activate_locked();
}

void VirtioPciTransport::activate_locked() {
  if (!(status_ & vp::FEATURES_OK)) {
    protocol_error("DRIVER_OK without FEATURES_OK", 0x14, status_);
    interrupt_->set_needs_reset();
    return;
  }
  auto r = start_device_locked(/*restoring=*/false);
  if (!r) {
    TERN_LOG_RATELIMITED(log_limit_, warn, "{}: activation failed: {}", name(),
                         r.error().message());
    interrupt_->set_needs_reset();
    return;
  }
  activated_ = true;
  spdlog::debug("{}: DRIVER_OK, features {:#x}", name(), driver_features_);
}

Result<void> VirtioPciTransport::start_device_locked(bool restoring) {
  std::vector<VirtqueueConfig> queues;
  std::vector<UniqueFd> kicks;
  for (size_t i = 0; i < queues_.size(); ++i) {
    queues.push_back(queues_[i].config);
    queues.back().restored = restoring;
    int fd = ::fcntl(kicks_[i].get(), F_DUPFD_CLOEXEC, 0);
    if (fd < 0) return fail_errno("fcntl(F_DUPFD_CLOEXEC)", "queue kick eventfd");
    kicks.emplace_back(fd);
  }
  // The work touches the device only (deadlock rule 2 in device_activator.h): everything it needs
  // from the transport is copied here, under our mutex.
  const uint64_t features = driver_features_;
  Result<void> r;
  auto work = [&] {
    r = device_->activate(mem_, features, std::move(queues), std::move(kicks), interrupt_);
    if (!r) device_->reset();
  };
  if (restoring)
    work();
  else
    run_device_work(work);
  return r;
}

void VirtioPciTransport::run_device_work(const DeviceActivator::Work& work) {
  if (activator_)
    activator_->run(work);
  else
    work();
}

void VirtioPciTransport::reset_locked() {
  if (activated_) run_device_work([this] { device_->reset(); });
  activated_ = false;
  status_ = 0;
  device_feature_select_ = driver_feature_select_ = 0;
  driver_features_ = 0;
  queue_select_ = 0;
  for (auto& q : queues_)
    q.config = VirtqueueConfig{device_->max_queue_size(), 0, 0, 0, false, {}, false};
  interrupt_->reset();
}

void VirtioPciTransport::protocol_error(const char* what, uint64_t offset, uint64_t value) {
  protocol_errors_.fetch_add(1, std::memory_order_relaxed);
  TERN_LOG_RATELIMITED(log_limit_, warn, "{}: {} (offset {:#x}, value {:#x}): ignored", name(),
                       what, offset, value);
}

uint8_t VirtioPciTransport::device_status() const {
  std::lock_guard lock(mu_);
  return status_ | (interrupt_->needs_reset() ? vp::DEVICE_NEEDS_RESET : 0);
}

uint64_t VirtioPciTransport::driver_features() const {
  std::lock_guard lock(mu_);
  return driver_features_;
}

bool VirtioPciTransport::activated() const {
  std::lock_guard lock(mu_);
  return activated_;
}

std::optional<uint64_t> VirtioPciTransport::notify_gpa() const {
  std::lock_guard lock(mu_);
  return notify_gpa_;
}

}  // namespace tern
