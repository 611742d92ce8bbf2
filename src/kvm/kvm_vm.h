// KvmVm: one KVM virtual machine fd — memslots, in-kernel irqchip/PIT, IRQ lines, vCPU creation.
#pragma once

#include <linux/kvm.h>

#include <cstdint>
#include <span>

#include "base/fd.h"
#include "base/result.h"
#include "kvm/kvm_vcpu.h"

namespace tern {

class KvmVm {
 public:
  KvmVm(UniqueFd fd, size_t vcpu_mmap_size) : fd_(std::move(fd)), vcpu_mmap_size_(vcpu_mmap_size) {}

  /// KVM_SET_USER_MEMORY_REGION: maps [gpa, gpa+size) of guest-physical space to host memory at
  /// `host` (page-aligned). Slot numbers are chosen by the caller.
  [[nodiscard]] Result<void> set_user_memory_region(uint32_t slot, uint64_t gpa, uint64_t size,
                                                    void* host, uint32_t flags = 0);
  /// KVM_SET_TSS_ADDR (x86, VMX needs 3 pages in guest-physical space outside RAM).
  [[nodiscard]] Result<void> set_tss_addr(uint64_t gpa);
  /// KVM_SET_IDENTITY_MAP_ADDR (x86, 1 page outside RAM).
  [[nodiscard]] Result<void> set_identity_map_addr(uint64_t gpa);
  /// KVM_CREATE_IRQCHIP: in-kernel PIC pair, IOAPIC and per-vCPU LAPICs.
  [[nodiscard]] Result<void> create_irqchip();
  /// KVM_CREATE_PIT2 with KVM_PIT_SPEAKER_DUMMY: the in-kernel i8254 PIT on ports 0x40-0x43 and
  /// port 0x61 (channel 2's gate and output; the speaker bits read back, no sound). Needs
  /// create_irqchip() first.
  [[nodiscard]] Result<void> create_pit2();
  /// KVM_IRQ_LINE: sets the level of GSI `irq` on the in-kernel irqchip.
  [[nodiscard]] Result<void> irq_line(uint32_t irq, bool level);
  /// KVM_IOEVENTFD: while assigned, a guest write of exactly `len` bytes (1, 2, 4 or 8) to MMIO
  /// guest-physical address `gpa` signals `fd` inside KVM (no userspace exit); any value matches
  /// (no datamatch). `assign` false removes the registration made with the same gpa/len/fd.
  [[nodiscard]] Result<void> set_ioeventfd(uint64_t gpa, uint32_t len, BorrowedFd fd, bool assign);
  /// KVM_IRQFD: while assigned, signalling `fd` injects GSI `gsi` through the routing table.
  [[nodiscard]] Result<void> set_irqfd(BorrowedFd fd, uint32_t gsi, bool assign);
  /// KVM_SET_GSI_ROUTING: replaces the WHOLE routing table with `entries` (the caller includes the
  /// irqchip routes for GSIs 0-23; see kvm/gsi_router.h). Uses kvm_abi.h's header layout.
  [[nodiscard]] Result<void> set_gsi_routing(std::span<const kvm_irq_routing_entry> entries);
  /// KVM_GET_IRQCHIP for `chip_id` (KVM_IRQCHIP_PIC_MASTER = 0, KVM_IRQCHIP_PIC_SLAVE = 1,
  /// KVM_IRQCHIP_IOAPIC = 2) of the in-kernel irqchip.
  [[nodiscard]] Result<kvm_irqchip> get_irqchip(uint32_t chip_id) const;
  /// KVM_SET_IRQCHIP: replaces the chip named by `chip.chip_id`.
  [[nodiscard]] Result<void> set_irqchip(const kvm_irqchip& chip);
  /// KVM_GET_PIT2 / KVM_SET_PIT2: the in-kernel i8254 PIT (needs create_pit2()).
  [[nodiscard]] Result<kvm_pit_state2> get_pit2() const;
  [[nodiscard]] Result<void> set_pit2(const kvm_pit_state2& s);
  /// KVM_GET_CLOCK: the VM's kvmclock in ns (plus KVM_CLOCK_* flags describing extra fields).
  [[nodiscard]] Result<kvm_clock_data> get_clock() const;
  /// KVM_SET_CLOCK: sets the kvmclock every vCPU sees to `c.clock` ns. The caller chooses
  /// `c.flags` (KVM_CLOCK_TSC_STABLE is output-only; older kernels refuse any flag).
  [[nodiscard]] Result<void> set_clock(const kvm_clock_data& c);
  /// KVM_CREATE_VCPU with vCPU id `id` (= its initial APIC ID) and maps its kvm_run.
  [[nodiscard]] Result<KvmVcpu> create_vcpu(uint32_t id);
  /// KVM_CHECK_EXTENSION on the VM fd.
  [[nodiscard]] int check_extension(long cap) const;

  [[nodiscard]] BorrowedFd fd() const { return fd_.borrow(); }

 private:
  UniqueFd fd_;
  size_t vcpu_mmap_size_;
};

}  // namespace tern
