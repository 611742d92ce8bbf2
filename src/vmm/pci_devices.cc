#include "vmm/pci_devices.h"

#include "arch/x86/layout.h"
#include "devices/pci/pc_chipset.h"

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

Result<void> KvmPciPlatform::set_ioeventfd(uint64_t gpa, uint32_t len, BorrowedFd fd, bool assign) {
  return vm_.set_ioeventfd(gpa, len, fd, assign);
}

Result<std::unique_ptr<PciDevices>> PciDevices::create(KvmVm& vm) {
  auto d = std::unique_ptr<PciDevices>(new PciDevices());
  d->platform_ = std::make_unique<KvmPciPlatform>(vm);
  d->root_ = std::make_unique<PciRoot>(x86::kPciMmioStart, x86::kPciMmioEnd - x86::kPciMmioStart);
  return d;
}

Result<std::unique_ptr<PciDevices>> PciDevices::create(
    KvmVm& vm, const GuestMemory& mem, std::vector<MadeDevice> devices,
    DeviceActivator* activator) {
  ASSIGN_OR_RETURN(auto d, create(vm));
  TRY(d->add_all(mem, std::move(devices), activator));
  return d;
}

Result<void> PciDevices::add_all(const GuestMemory& mem, std::vector<MadeDevice> devices,
                                 DeviceActivator* activator) {
  for (auto& dev : devices) {
    if (auto* virtio = std::get_if<std::shared_ptr<VirtioDevice>>(&dev))
      TRY(add_virtio(std::move(*virtio), mem, activator));
    else
      TRY(add_model(*std::get<std::shared_ptr<PciFunctionModel>>(dev), mem, activator));
  }
  return {};
}

Result<uint8_t> PciDevices::add_model(PciFunctionModel& model, const GuestMemory& mem,
                                      DeviceActivator* activator) {
  const std::string name(model.name());
  auto fn = model.make_function(PciFunctionServices{&mem, &next_platform(), activator});
  if (!fn) return fail(name, fn.error().message());
  return add(std::move(*fn));
}

void PciDevices::use_piix_intx() {
  piix_intx_ = true;
  if (!intx_router_) intx_router_ = std::make_unique<IntxRouter>(*platform_);
}

PciPlatform& PciDevices::next_platform() {
  if (!intx_router_) return *platform_;
  // Functions on IRQ 10/11 share the line level-triggered: KVM_IRQ_LINE keeps one level per
  // IRQ, so each function's level goes through the router's OR (a lower by one must not drop
  // another's pending interrupt).
  intx_sources_.push_back(intx_router_->source());
  return *intx_sources_.back();
}

Result<uint8_t> PciDevices::add(std::shared_ptr<PciFunction> fn) {
  const std::string name(fn->name());
  // Firmware-style initial BAR assignment inside the window, so Linux keeps it.
  auto placed = root_->allocate_bars(fn->bars());
  if (!placed) return fail(name, placed.error().message());
  PciPlacement p = *placed;
  p.intx_irq = kIntxIrqs[functions_.size() % std::size(kIntxIrqs)];
  if (piix_intx_) {
    // The slot root_->add() picks next, and the IRQ the firmware writes into its Interrupt Line.
    if (auto slot = root_->next_free_slot()) p.intx_irq = piix_intx_irq(*slot, 1);
  }
  if (auto ok = fn->place(p); !ok) return fail(name, ok.error().message());
  auto slot = root_->add(fn);
  if (!slot) return fail(name, slot.error().message());
  functions_.push_back(std::move(fn));
  slots_.push_back(*slot);
  return *slot;
}

Result<uint8_t> PciDevices::add_virtio(std::shared_ptr<VirtioDevice> device, const GuestMemory& mem,
                                       DeviceActivator* activator) {
  const std::string name(device->name());
  auto t = VirtioPciTransport::create(std::move(device), mem, next_platform(), activator);
  if (!t) return fail(name, t.error().message());
  ASSIGN_OR_RETURN(uint8_t slot, add(*t));
  transports_.push_back(std::move(*t));
  return slot;
}

PciDevices::~PciDevices() {
  // Functions reset their devices in their destructors; drop the root's references first.
  root_.reset();
  transports_.clear();
  functions_.clear();
}

Result<void> PciDevices::attach(Bus& pio, Bus& mmio) {
  return root_->attach(pio, mmio);
}

std::vector<DeviceCounters> PciDevices::counters() const {
  std::vector<DeviceCounters> out;
  out.reserve(functions_.size());
  for (size_t i = 0; i < functions_.size(); ++i) {
    DeviceCounters c = functions_[i]->counters();
    const DeviceAccessCounters& bar = root_->bar_access(slots_[i]);
    c.counters.emplace_back("mmio_reads", bar.reads.load(std::memory_order_relaxed));
    c.counters.emplace_back("mmio_writes", bar.writes.load(std::memory_order_relaxed));
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace tern
