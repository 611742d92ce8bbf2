#include "kvm/gsi_router.h"

namespace tern {

static_assert(sizeof(kvm_irq_routing_entry) == 48);

namespace {

kvm_irq_routing_entry irqchip_route(uint32_t gsi, uint32_t chip, uint32_t pin) {
  kvm_irq_routing_entry e{};
  e.gsi = gsi;
  e.type = KVM_IRQ_ROUTING_IRQCHIP;
  e.u.irqchip.irqchip = chip;
  e.u.irqchip.pin = pin;
  return e;
}

}  // namespace

Result<uint32_t> GsiRouter::allocate() {
  std::lock_guard lock(mu_);
  if (next_gsi_ >= kMaxGsi) return fail("GSI allocation", "no free GSI for an MSI route");
  return next_gsi_++;
}

Result<void> GsiRouter::set_msi(uint32_t gsi, uint64_t address, uint32_t data) {
  std::lock_guard lock(mu_);
  kvm_irq_routing_entry e{};
  e.gsi = gsi;
  e.type = KVM_IRQ_ROUTING_MSI;
  e.u.msi.address_lo = static_cast<uint32_t>(address);
  e.u.msi.address_hi = static_cast<uint32_t>(address >> 32);
  e.u.msi.data = data;
  msi_[gsi] = e;
  auto t = table_locked();
  return vm_.set_gsi_routing(t);
}

std::vector<kvm_irq_routing_entry> GsiRouter::table() const {
  std::lock_guard lock(mu_);
  return table_locked();
}

std::vector<kvm_irq_routing_entry> GsiRouter::table_locked() const {
  // Mirrors KVM's default x86 routing (virt/kvm/irqchip.c, arch/x86/kvm/irq_comm.c).
  std::vector<kvm_irq_routing_entry> t;
  for (uint32_t gsi = 0; gsi < 16; ++gsi) {
    t.push_back(irqchip_route(gsi, gsi < 8 ? KVM_IRQCHIP_PIC_MASTER : KVM_IRQCHIP_PIC_SLAVE,
                              gsi % 8));
    t.push_back(irqchip_route(gsi, KVM_IRQCHIP_IOAPIC, gsi));
  }
  for (uint32_t gsi = 16; gsi < kFirstMsiGsi; ++gsi)
    t.push_back(irqchip_route(gsi, KVM_IRQCHIP_IOAPIC, gsi));
  for (const auto& [gsi, e] : msi_) t.push_back(e);
  return t;
}

}  // namespace tern
