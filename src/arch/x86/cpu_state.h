// Initial x86-64 vCPU state for the Linux 64-bit boot protocol (Documentation/x86/boot.rst,
// "64-bit BOOT PROTOCOL"): long mode with identity-mapped page tables, a flat GDT with
// __BOOT_CS = 0x10 and __BOOT_DS = 0x18, RSI = boot_params, interrupts off.
#pragma once

#include <linux/kvm.h>

#include <cstdint>
#include <vector>

#include "base/result.h"
#include "kvm/kvm_vcpu.h"
#include "memory/guest_memory.h"

namespace tern::x86 {

inline constexpr uint16_t kBootCsSelector = 0x10;
inline constexpr uint16_t kBootDsSelector = 0x18;
inline constexpr uint16_t kBootTssSelector = 0x20;

/// Writes the boot GDT at kGdtAddr and identity page tables mapping GPA [0, 4 GiB) with 2 MiB
/// pages at kPml4Addr.. (PML4, PDPT, 4 PDs). Call once per VM, before any vCPU runs.
[[nodiscard]] Result<void> write_boot_page_tables_and_gdt(const GuestMemory& mem);

/// The segment/control register state for 64-bit entry, applied on top of `base` (KVM_GET_SREGS).
[[nodiscard]] kvm_sregs long_mode_sregs(const kvm_sregs& base);

/// The MSRs tern initialises on every vCPU (SYSENTER/SYSCALL MSRs zeroed, MISC_ENABLE fast
/// strings, MTRR default type write-back).
[[nodiscard]] std::vector<MsrValue> boot_msrs();

/// Sets up one vCPU for 64-bit entry at `entry_rip` with RSI = `boot_params_gpa`: sregs, regs,
/// FPU (FCW 0x37f, MXCSR 0x1f80), MSRs, and the LAPIC's LINT0 = ExtINT, LINT1 = NMI (as a PC's
/// firmware leaves them). For APs the registers are later replaced by INIT/SIPI; MSRs and LAPIC
/// still matter. MSRs the host KVM refuses are logged and skipped.
[[nodiscard]] Result<void> setup_boot_vcpu(KvmVcpu& vcpu, uint64_t entry_rip,
                                           uint64_t boot_params_gpa);

}  // namespace tern::x86
