// GsiRouter: owns KVM's GSI routing table — the default irqchip routes for GSIs 0-23 plus one MSI
// route per GSI handed out from 24 up — and rewrites it whole with KVM_SET_GSI_ROUTING.
#pragma once

#include <linux/kvm.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "base/result.h"
#include "kvm/kvm_vm.h"

namespace tern {

/// KVM_SET_GSI_ROUTING replaces the whole table, so every change re-sends the irqchip routes KVM
/// installs by default (x86: GSI 0-15 to the 8259 pair and IOAPIC pin n, GSI 16-23 to the IOAPIC)
/// together with every MSI route. Thread-safe (one mutex); changes are rare (driver setup).
class GsiRouter {
 public:
  /// First GSI handed out for MSI routes (GSIs 0-23 are the IOAPIC pins).
  static constexpr uint32_t kFirstMsiGsi = 24;
  /// KVM_MAX_IRQ_ROUTES on x86.
  static constexpr uint32_t kMaxGsi = 4096;

  explicit GsiRouter(KvmVm& vm) : vm_(vm) {}

  /// Reserves a GSI for an MSI route (no route installed yet). Fails when GSIs run out.
  [[nodiscard]] Result<uint32_t> allocate();
  /// Routes `gsi` (from allocate()) to the MSI message `address`/`data` (PCI 6.8 message address
  /// and data, as the guest wrote them in the MSI-X table) and pushes the table to KVM.
  [[nodiscard]] Result<void> set_msi(uint32_t gsi, uint64_t address, uint32_t data);

  /// The table that would be sent now: irqchip defaults then MSI routes by GSI.
  [[nodiscard]] std::vector<kvm_irq_routing_entry> table() const;

 private:
  std::vector<kvm_irq_routing_entry> table_locked() const;
  KvmVm& vm_;
  mutable std::mutex mu_;
  uint32_t next_gsi_ = kFirstMsiGsi;
  std::map<uint32_t, kvm_irq_routing_entry> msi_;  // by GSI
};

}  // namespace tern
