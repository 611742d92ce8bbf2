#include "arch/x86/cpu_state.h"

#include <array>
#include <cstring>

#include "arch/x86/layout.h"
#include "base/log.h"

namespace tern::x86 {

namespace {

constexpr uint64_t kCr0Pe = 1ull << 0;
constexpr uint64_t kCr0Et = 1ull << 4;
constexpr uint64_t kCr0Pg = 1ull << 31;
constexpr uint64_t kCr4Pae = 1ull << 5;
constexpr uint64_t kEferLme = 1ull << 8;
constexpr uint64_t kEferLma = 1ull << 10;

/// A GDT descriptor from flags (the 0xF0FF bits of the access/flags word), base and limit.
constexpr uint64_t gdt_entry(uint16_t flags, uint32_t base, uint32_t limit) {
  return ((uint64_t{base} & 0xff000000u) << 32) | ((uint64_t{flags} & 0xf0ffu) << 40) |
         ((uint64_t{limit} & 0x000f0000u) << 32) | ((uint64_t{base} & 0x00ffffffu) << 16) |
         (uint64_t{limit} & 0x0000ffffu);
}

// Index 2 = __BOOT_CS (0x10), 3 = __BOOT_DS (0x18), 4 = TSS (0x20), 5 = 32-bit code (0x28).
// The PVH entry (32-bit protected mode) uses 5 for CS, 3 for the data segments (flat 4 GiB, D/B=1:
// already a 32-bit data segment) and 4 for TR (system type 0xB is "busy 32-bit TSS" outside long
// mode and "busy 64-bit TSS" in it).
constexpr std::array<uint64_t, 6> kGdt = {
    0,
    0,
    gdt_entry(0xa09b, 0, 0xfffff),  // 64-bit code: L=1, G=1, P, DPL0, execute/read, accessed
    gdt_entry(0xc093, 0, 0xfffff),  // data: D/B=1, G=1, P, read/write, accessed
    gdt_entry(0x808b, 0, 0xfffff),  // busy TSS
    gdt_entry(0xc09b, 0, 0xfffff),  // 32-bit code: D=1, G=1, P, DPL0, execute/read, accessed
};
static_assert(kGdt.size() * 8 <= kZeroPageAddr - kGdtAddr);

/// The KVM segment register that a GDT descriptor at `index` loads.
kvm_segment segment_from_gdt(uint64_t e, uint16_t index) {
  kvm_segment s{};
  s.base = ((e >> 16) & 0xffffff) | (((e >> 56) & 0xff) << 24);
  uint32_t limit = static_cast<uint32_t>((e & 0xffff) | (((e >> 48) & 0xf) << 16));
  s.g = (e >> 55) & 1;
  s.limit = s.g ? (limit << 12) | 0xfff : limit;
  s.selector = static_cast<uint16_t>(index * 8);
  s.type = (e >> 40) & 0xf;
  s.s = (e >> 44) & 1;
  s.dpl = (e >> 45) & 3;
  s.present = (e >> 47) & 1;
  s.avl = (e >> 52) & 1;
  s.l = (e >> 53) & 1;
  s.db = (e >> 54) & 1;
  s.unusable = s.present ? 0 : 1;
  return s;
}

}  // namespace

Result<void> write_boot_page_tables_and_gdt(const GuestMemory& mem) {
  for (size_t i = 0; i < kGdt.size(); ++i) TRY(mem.write_obj(kGdtAddr + i * 8, kGdt[i]));
  // PML4[0] -> PDPT; PDPT[0..3] -> PD0..PD3; each PD maps 1 GiB with 512 2-MiB pages.
  constexpr uint64_t kPresentRw = 0x3;
  constexpr uint64_t kPageSize2M = 0x80;
  TRY(mem.write_obj<uint64_t>(kPml4Addr, kPdptAddr | kPresentRw));
  for (uint64_t i = 0; i < 4; ++i) {
    uint64_t pd = kPdAddr + i * 0x1000;
    TRY(mem.write_obj<uint64_t>(kPdptAddr + i * 8, pd | kPresentRw));
    for (uint64_t j = 0; j < 512; ++j) {
      uint64_t gpa = ((i << 9) + j) << 21;
      TRY(mem.write_obj<uint64_t>(pd + j * 8, gpa | kPresentRw | kPageSize2M));
    }
  }
  return {};
}

/// `base` with CS from boot-GDT entry `code_index`, flat data segments (entry 3), TR from `tss`
/// and the boot GDT loaded, no IDT: what both entry states share.
static kvm_sregs flat_segments(const kvm_sregs& base, size_t code_index, const kvm_segment& tss) {
  kvm_sregs s = base;
  s.cs = segment_from_gdt(kGdt[code_index], static_cast<uint16_t>(code_index));
  s.ds = s.es = s.fs = s.gs = s.ss = segment_from_gdt(kGdt[3], 3);
  s.tr = tss;
  s.gdt.base = kGdtAddr;
  s.gdt.limit = static_cast<uint16_t>(kGdt.size() * 8 - 1);
  s.idt.base = 0;
  s.idt.limit = 0;
  return s;
}

kvm_sregs long_mode_sregs(const kvm_sregs& base) {
  kvm_sregs s = flat_segments(base, 2, segment_from_gdt(kGdt[4], 4));
  s.cr0 = kCr0Pe | kCr0Et | kCr0Pg;  // caches enabled (CD/NW clear)
  s.cr3 = kPml4Addr;
  s.cr4 = kCr4Pae;
  s.efer = kEferLme | kEferLma;
  return s;
}

kvm_sregs pvh_sregs(const kvm_sregs& base) {
  kvm_segment tss = segment_from_gdt(kGdt[4], 4);
  // pvh.pandoc: "tr: must be a 32-bit TSS (active) with a base of '0' and a limit of '0x67'" (the
  // hidden part KVM loads; the guest never reloads TR from this GDT before installing its own).
  tss.base = 0;
  tss.limit = 0x67;
  tss.g = 0;
  kvm_sregs s = flat_segments(base, 5, tss);
  s.cr0 = kCr0Pe | kCr0Et;  // protected mode, paging off, caches enabled
  s.cr3 = 0;
  s.cr4 = 0;
  s.efer = 0;
  return s;
}

std::vector<MsrValue> boot_msrs() {
  return {
      {0x174, 0},                // IA32_SYSENTER_CS
      {0x175, 0},                // IA32_SYSENTER_ESP
      {0x176, 0},                // IA32_SYSENTER_EIP
      {0xc0000081, 0},           // STAR
      {0xc0000082, 0},           // LSTAR
      {0xc0000083, 0},           // CSTAR
      {0xc0000084, 0},           // SYSCALL_MASK (FMASK)
      {0xc0000102, 0},           // KERNEL_GS_BASE
      {0x1a0, 1},                // IA32_MISC_ENABLE: fast strings
      {0x2ff, (1u << 11) | 6u},  // MTRRdefType: MTRRs enabled, default write-back
  };
}

namespace {

/// What both entry protocols set the same way: FPU, MSRs, LAPIC LINT0/LINT1. After sregs/regs.
Result<void> setup_common_vcpu_state(KvmVcpu& vcpu) {
  kvm_fpu fpu{};
  fpu.fcw = 0x37f;
  fpu.mxcsr = 0x1f80;
  TRY(vcpu.set_fpu(fpu));

  // KVM_SET_MSRS stops at the first MSR it refuses (some software KVMs fail the whole ioctl):
  // set them one by one and skip refusals; none of them is needed to reach the kernel's entry.
  for (const MsrValue& m : boot_msrs()) {
    auto n = vcpu.set_msrs(std::span<const MsrValue>(&m, 1));
    if (!n || *n != 1) spdlog::debug("vCPU {}: host KVM refused MSR {:#x}", vcpu.id(), m.index);
  }

  ASSIGN_OR_RETURN(kvm_lapic_state lapic, vcpu.get_lapic());
  auto set_lvt = [&](size_t off, uint32_t mode) {
    uint32_t v;
    std::memcpy(&v, lapic.regs + off, 4);
    v = (v & ~0x700u) | (mode << 8);
    std::memcpy(lapic.regs + off, &v, 4);
  };
  set_lvt(0x350, 7);  // LVT LINT0: ExtINT (the 8259 PIC's output)
  set_lvt(0x360, 4);  // LVT LINT1: NMI
  TRY(vcpu.set_lapic(lapic));
  return {};
}

}  // namespace

Result<void> setup_boot_vcpu(KvmVcpu& vcpu, uint64_t entry_rip, uint64_t boot_params_gpa) {
  // Order: sregs (mode) before regs; MSRs and FPU are independent; LAPIC last.
  ASSIGN_OR_RETURN(kvm_sregs base, vcpu.get_sregs());
  TRY(vcpu.set_sregs(long_mode_sregs(base)));

  kvm_regs regs{};
  regs.rflags = 0x2;  // reserved bit 1; IF clear
  regs.rip = entry_rip;
  regs.rsi = boot_params_gpa;
  regs.rsp = kBootStackPointer;
  regs.rbp = kBootStackPointer;
  TRY(vcpu.set_regs(regs));
  return setup_common_vcpu_state(vcpu);
}

Result<void> setup_pvh_vcpu(KvmVcpu& vcpu, uint32_t entry_eip, uint32_t start_info_gpa) {
  // KVM ordering: CPUID (KVM_SET_CPUID2, done by the caller) before sregs, because KVM checks
  // CR4/EFER bits against the guest's CPUID; sregs (the mode: CR0.PE, 32-bit CS) before regs, so
  // RIP and RFLAGS are taken in the mode the vCPU will run in; FPU and MSRs are independent;
  // LAPIC last (after KVM_CREATE_IRQCHIP, which the VM did first).
  ASSIGN_OR_RETURN(kvm_sregs base, vcpu.get_sregs());
  TRY(vcpu.set_sregs(pvh_sregs(base)));

  // pvh.pandoc: EBX = start_info, EFLAGS with VM, IF and TF clear (0x2: only the reserved bit),
  // EIP = the PHYS32_ENTRY; every other register undefined (zeroed here; no stack is promised).
  kvm_regs regs{};
  regs.rflags = 0x2;
  regs.rip = entry_eip;
  regs.rbx = start_info_gpa;
  TRY(vcpu.set_regs(regs));
  return setup_common_vcpu_state(vcpu);
}

}  // namespace tern::x86
