// Initial x86-64 vCPU state for the Linux 64-bit boot protocol (Documentation/x86/boot.rst,
// "64-bit BOOT PROTOCOL"): long mode with identity-mapped page tables, a flat GDT with
// __BOOT_CS = 0x10 and __BOOT_DS = 0x18, RSI = boot_params, interrupts off; and for the PVH entry
// (Xen docs/misc/pvh.pandoc): 32-bit protected mode, paging off, flat 32-bit CS = 0x28 and
// DS/ES/SS/FS/GS = 0x18, a busy 32-bit TSS in TR, EBX = hvm_start_info, interrupts off.
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
inline constexpr uint16_t kPvhCsSelector = 0x28;  ///< 32-bit flat code segment (PVH entry).

/// Writes the boot GDT at kGdtAddr and identity page tables mapping GPA [0, 4 GiB) with 2 MiB
/// pages at kPml4Addr.. (PML4, PDPT, 4 PDs). Call once per VM, before any vCPU runs.
[[nodiscard]] Result<void> write_boot_page_tables_and_gdt(const GuestMemory& mem);

/// The segment/control register state for 64-bit entry, applied on top of `base` (KVM_GET_SREGS).
[[nodiscard]] kvm_sregs long_mode_sregs(const kvm_sregs& base);

/// The segment/control register state for the PVH entry, applied on top of `base`: CR0 = PE|ET,
/// CR3 = CR4 = EFER = 0, CS = kPvhCsSelector (execute/read, base 0, limit 4 GiB, D=1, G=1),
/// DS/ES/SS/FS/GS = kBootDsSelector, TR = kBootTssSelector (busy 32-bit TSS, base 0, limit 0x67),
/// GDT at kGdtAddr.
[[nodiscard]] kvm_sregs pvh_sregs(const kvm_sregs& base);

/// The MSRs tern initialises on every vCPU (SYSENTER/SYSCALL MSRs zeroed, MISC_ENABLE fast
/// strings, MTRR default type write-back).
[[nodiscard]] std::vector<MsrValue> boot_msrs();

/// Sets up one vCPU for 64-bit entry at `entry_rip` with RSI = `boot_params_gpa`: sregs, regs,
/// FPU (FCW 0x37f, MXCSR 0x1f80), MSRs, and the LAPIC's LINT0 = ExtINT, LINT1 = NMI (as a PC's
/// firmware leaves them). For APs the registers are later replaced by INIT/SIPI; MSRs and LAPIC
/// still matter. MSRs the host KVM refuses are logged and skipped.
[[nodiscard]] Result<void> setup_boot_vcpu(KvmVcpu& vcpu, uint64_t entry_rip,
                                           uint64_t boot_params_gpa);

/// Sets up one vCPU for the PVH entry at `entry_eip` with EBX = `start_info_gpa`, EFLAGS = 0x2:
/// pvh_sregs(), then the same FPU, MSRs and LAPIC LINT setup as setup_boot_vcpu().
[[nodiscard]] Result<void> setup_pvh_vcpu(KvmVcpu& vcpu, uint32_t entry_eip,
                                          uint32_t start_info_gpa);

}  // namespace tern::x86
