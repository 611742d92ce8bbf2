// The x86 processor state after RESET (Intel SDM Vol. 3A §9.1.1 "Processor State After Reset",
// Table 9-1): what a vCPU that runs firmware from the reset vector starts with.
//
// KVM ordering rules this relies on (KVM API, Documentation/virt/kvm/api.rst):
//  - KVM_CREATE_IRQCHIP before KVM_CREATE_VCPU: each vCPU then gets an in-kernel LAPIC, and KVM
//    makes the vCPU whose id is the BSP's (0, KVM_SET_BOOT_CPU_ID's default) RUNNABLE and every
//    other vCPU KVM_MP_STATE_UNINITIALIZED (waiting for INIT/SIPI, §4.38 KVM_SET_MP_STATE).
//  - KVM_SET_CPUID2 before KVM_SET_SREGS (KVM checks CR4/EFER bits against the guest's CPUID).
//  - KVM_SET_SREGS before KVM_SET_REGS: RIP/RFLAGS are taken in the mode the sregs set.
//  - KVM_SET_MP_STATE after KVM_SET_REGS/SREGS: an AP's registers are replaced at its SIPI anyway;
//    the BSP must be RUNNABLE to run the reset vector.
#pragma once

#include <linux/kvm.h>

#include <cstdint>

#include "base/result.h"
#include "kvm/kvm_vcpu.h"

namespace tern::x86 {

/// CR0 after RESET: CD | NW | ET (0x60000010).
inline constexpr uint64_t kResetCr0 = 0x60000010;
/// CS after RESET: selector 0xF000, base 0xFFFF0000 (so CS:IP = 0xFFFFFFF0, the reset vector).
inline constexpr uint16_t kResetCsSelector = 0xF000;
inline constexpr uint64_t kResetCsBase = 0xFFFF0000;
inline constexpr uint64_t kResetRip = 0xFFF0;

/// `base` (KVM_GET_SREGS) in the state after RESET: real mode, CR0 = kResetCr0, CR2/CR3/CR4 and
/// EFER 0, CS = F000 base FFFF0000, DS/ES/FS/GS/SS selector 0 base 0, all limits 0xFFFF
/// (present, read/write accessed data; CS execute/read accessed), GDTR/IDTR base 0 limit 0xFFFF,
/// LDTR and TR base 0 limit 0xFFFF (LDT type 2, busy 16-bit TSS type 3). APIC base untouched.
[[nodiscard]] kvm_sregs reset_sregs(const kvm_sregs& base);

/// The general registers after RESET: RIP 0xFFF0, RFLAGS 0x2, EDX = `cpuid_signature` (family,
/// model, stepping: CPUID.01H:EAX), everything else 0.
[[nodiscard]] kvm_regs reset_regs(uint32_t cpuid_signature);

/// Puts vCPU `vcpu` in the RESET state: sregs, regs (EDX = `cpuid_signature`); then its MP state:
/// RUNNABLE for the bootstrap processor (`bsp`), UNINITIALIZED (waiting for the firmware's
/// INIT-SIPI through the in-kernel LAPIC) for the others. Call after KVM_SET_CPUID2.
[[nodiscard]] Result<void> setup_reset_vcpu(KvmVcpu& vcpu, bool bsp, uint32_t cpuid_signature);

}  // namespace tern::x86
