// PciPlatform: what PCI devices need from the VMM — MSI routes and irqfds, legacy INTx levels,
// ioeventfds — so devices stay testable without KVM (src/vmm/pci_devices.cc implements it on
// KvmVm; unit tests use a fake).
#pragma once

#include <cstdint>

#include "base/fd.h"
#include "base/result.h"

namespace tern {

class PciPlatform {
 public:
  virtual ~PciPlatform() = default;
  /// Reserves a GSI for one MSI-X vector and binds `irqfd` to it (KVM_IRQFD): signalling the
  /// eventfd injects the GSI. The GSI has no route until set_msi_route().
  [[nodiscard]] virtual Result<uint32_t> allocate_msi(BorrowedFd irqfd) = 0;
  /// Routes `gsi` to the MSI message (address, data) the guest programmed (KVM_SET_GSI_ROUTING).
  [[nodiscard]] virtual Result<void> set_msi_route(uint32_t gsi, uint64_t address,
                                                   uint32_t data) = 0;
  /// Sets the level of legacy interrupt line `irq` (an IOAPIC pin / ISA IRQ; KVM_IRQ_LINE).
  /// Must be quick; called with device locks held.
  virtual void set_irq_level(uint32_t irq, bool level) = 0;
  /// KVM_IOEVENTFD: while assigned, a guest write of exactly `len` bytes to MMIO `gpa` signals
  /// `fd` without a userspace exit. Deassign with the same gpa/len/fd.
  [[nodiscard]] virtual Result<void> set_ioeventfd(uint64_t gpa, uint32_t len, BorrowedFd fd,
                                                   bool assign) = 0;
};

}  // namespace tern
