#include "arch/x86/reset_state.h"

namespace tern::x86 {

namespace {

/// A real-mode segment: `selector`, `base`, limit 0xFFFF, present, S=1, of `type`.
kvm_segment real_mode_segment(uint16_t selector, uint64_t base, uint8_t type) {
  kvm_segment s{};
  s.selector = selector;
  s.base = base;
  s.limit = 0xFFFF;
  s.type = type;
  s.present = 1;
  s.s = 1;
  return s;
}

/// A system segment (LDTR, TR) after RESET: selector 0, base 0, limit 0xFFFF, present.
kvm_segment system_segment(uint8_t type) {
  kvm_segment s = real_mode_segment(0, 0, type);
  s.s = 0;
  return s;
}

}  // namespace

kvm_sregs reset_sregs(const kvm_sregs& base) {
  kvm_sregs s = base;
  constexpr uint8_t kCodeExecReadAccessed = 0xB;
  constexpr uint8_t kDataReadWriteAccessed = 0x3;
  s.cs = real_mode_segment(kResetCsSelector, kResetCsBase, kCodeExecReadAccessed);
  s.ds = s.es = s.fs = s.gs = s.ss = real_mode_segment(0, 0, kDataReadWriteAccessed);
  s.ldt = system_segment(0x2);  // LDT
  s.tr = system_segment(0x3);   // busy 16-bit TSS
  s.gdt.base = 0;
  s.gdt.limit = 0xFFFF;
  s.idt.base = 0;
  s.idt.limit = 0xFFFF;
  s.cr0 = kResetCr0;
  s.cr2 = s.cr3 = s.cr4 = 0;
  s.cr8 = 0;
  s.efer = 0;
  return s;
}

kvm_regs reset_regs(uint32_t cpuid_signature) {
  kvm_regs r{};
  r.rip = kResetRip;
  r.rflags = 0x2;
  r.rdx = cpuid_signature;
  return r;
}

Result<void> setup_reset_vcpu(KvmVcpu& vcpu, bool bsp, uint32_t cpuid_signature) {
  ASSIGN_OR_RETURN(kvm_sregs base, vcpu.get_sregs());
  TRY(vcpu.set_sregs(reset_sregs(base)));
  TRY(vcpu.set_regs(reset_regs(cpuid_signature)));
  kvm_mp_state mp{};
  mp.mp_state = bsp ? KVM_MP_STATE_RUNNABLE : KVM_MP_STATE_UNINITIALIZED;
  return vcpu.set_mp_state(mp);
}

}  // namespace tern::x86
