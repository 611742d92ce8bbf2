#include "vmm/pci_devices.h"

#include "arch/x86/layout.h"
#include "virtio/transport/virtio_pci_registers.h"

namespace tern {

Result<uint32_t> KvmPciPlatform::allocate_msi(BorrowedFd irqfd) {
  ASSIGN_OR_RETURN(uint32_t gsi, router_.allocate());
  TRY(vm_.set_irqfd(irqfd, gsi, true));
  return gsi;
}

Result<void> KvmPciPlatform::set_msi_route(uint32_t gsi, uint64_t address, uint32_t data) {
  return router_.set_msi(gsi, address, data);
}

void KvmPciPlatform::set_irq_level(uint32_t irq, bool level) {
  auto r = vm_.irq_line(irq, level);
  if (!r) TERN_LOG_RATELIMITED(log_limit_, warn, "{}", r.error().message());
}

Result<void> KvmPciPlatform::set_ioeventfd(uint64_t gpa, uint32_t len, BorrowedFd fd,
                                          bool assign) {
  return vm_.set_ioeventfd(gpa, len, fd, assign);
}

Result<std::unique_ptr<PciDevices>> PciDevices::create(
    KvmVm& vm, const GuestMemory& mem, std::vector<std::shared_ptr<VirtioDevice>> devices) {
  auto d = std::unique_ptr<PciDevices>(new PciDevices());
  d->platform_ = std::make_unique<KvmPciPlatform>(vm);
  d->root_ = std::make_unique<PciRoot>(x86::kPciMmioStart, x86::kPciMmioEnd - x86::kPciMmioStart);
  size_t i = 0;
  for (auto& dev : devices) {
    // Firmware-style initial BAR assignment inside the window, so Linux keeps it.
    ASSIGN_OR_RETURN(uint64_t bar0, d->root_->allocate_mmio(virtio_pci::kVirtioBarSize));
    ASSIGN_OR_RETURN(uint64_t bar1, d->root_->allocate_mmio(virtio_pci::kMsixBarSize));
    VirtioPciPlacement p{.virtio_bar_gpa = static_cast<uint32_t>(bar0),
                         .msix_bar_gpa = static_cast<uint32_t>(bar1),
                         .intx_irq = kIntxIrqs[i++ % std::size(kIntxIrqs)]};
    std::string name(dev->name());
    auto t = VirtioPciTransport::create(std::move(dev), mem, *d->platform_, p);
    if (!t) return fail(name, t.error().message());
    TRY(d->root_->add(*t));
    d->transports_.push_back(std::move(*t));
  }
  return d;
}

PciDevices::~PciDevices() {
  // Transports reset their devices in their destructors; drop the root's references first.
  root_.reset();
  transports_.clear();
}

Result<void> PciDevices::attach(Bus& pio, Bus& mmio) { return root_->attach(pio, mmio); }

// TEMPORARY (helper "stats"): replaced by helper "pcidev"'s PciDevices::counters() at merge.
std::vector<DeviceCounters> PciDevices::counters() const {
  std::vector<DeviceCounters> out;
  out.reserve(transports_.size());
  for (const auto& t : transports_) {
    DeviceCounters c = t->device().counters();
    c.counters.emplace_back("protocol_errors", t->protocol_errors());
    c.counters.emplace_back("interrupts_sent", t->interrupt().interrupts_sent());
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace tern

namespace tern {

namespace {
constexpr uint32_t kPciVersion = 1;
}  // namespace

void PciDevices::quiesce() {
  for (auto& t : transports_) t->device().quiesce();
  quiesced_ = true;
}

void PciDevices::unquiesce() {
  for (auto& t : transports_) t->device().unquiesce();
  quiesced_ = false;
}

void PciDevices::save_state(snap::ByteWriter& w) const {
  TERN_CHECK(quiesced_);  // queue positions are only consistent while quiesced
  w.u32(kPciVersion);
  root_->save_state(w);
  w.u32(static_cast<uint32_t>(transports_.size()));
  for (const auto& t : transports_) {
    w.u32(t->device().device_type());
    w.string(t->device().name());
    t->save_state(w);
  }
}

Result<void> PciDevices::restore_state(snap::ByteReader& r) {
  ASSIGN_OR_RETURN(uint32_t v, r.u32());
  if (v != kPciVersion)
    return fail("restore pci devices", "version " + std::to_string(v) + " (this tern reads " +
                                           std::to_string(kPciVersion) + ")");
  TRY(root_->restore_state(r));
  ASSIGN_OR_RETURN(uint32_t n, r.u32());
  if (n != transports_.size())
    return fail("restore pci devices",
                "the snapshot has " + std::to_string(n) + " virtio-pci function(s), this VM " +
                    std::to_string(transports_.size()) + " (restore with the same devices)");
  for (size_t i = 0; i < n; ++i) {
    VirtioDevice& dev = transports_[i]->device();
    ASSIGN_OR_RETURN(uint32_t type, r.u32());
    ASSIGN_OR_RETURN(std::string name, r.string(256));
    if (type != dev.device_type() || name != dev.name())
      return fail("restore pci devices",
                  "function " + std::to_string(i) + " is " + name + " (virtio type " +
                      std::to_string(type) + ") in the snapshot, " + std::string(dev.name()) +
                      " (virtio type " + std::to_string(dev.device_type()) + ") in this VM");
    TRY(transports_[i]->restore_state(r));
  }
  root_->refresh_bar_mappings();
  return r.expect_end();
}

}  // namespace tern
