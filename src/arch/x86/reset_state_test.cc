// Unit tests: the vCPU state after RESET (Intel SDM Vol. 3A §9.1.1, Table 9-1).
#include "arch/x86/reset_state.h"

#include <gtest/gtest.h>

namespace tern::x86 {
namespace {

TEST(ResetState, RealModeAtTheResetVector) {
  kvm_sregs base{};
  base.cr0 = 0x80000011;  // whatever was there before
  base.efer = 0x500;
  base.apic_base = 0xFEE00900;
  kvm_sregs s = reset_sregs(base);
  EXPECT_EQ(s.cr0, 0x60000010u);
  EXPECT_EQ(s.cr3, 0u);
  EXPECT_EQ(s.cr4, 0u);
  EXPECT_EQ(s.efer, 0u);
  EXPECT_EQ(s.apic_base, 0xFEE00900u);  // left to KVM (BSP flag, enable)
  EXPECT_EQ(s.cs.selector, 0xF000);
  EXPECT_EQ(s.cs.base, 0xFFFF0000u);
  EXPECT_EQ(s.cs.limit, 0xFFFFu);
  EXPECT_EQ(s.cs.type, 0xB);
  EXPECT_EQ(s.cs.present, 1);
  EXPECT_EQ(s.cs.db, 0);  // 16-bit
  for (const kvm_segment* d : {&s.ds, &s.es, &s.fs, &s.gs, &s.ss}) {
    EXPECT_EQ(d->selector, 0);
    EXPECT_EQ(d->base, 0u);
    EXPECT_EQ(d->limit, 0xFFFFu);
    EXPECT_EQ(d->type, 0x3);
  }
  EXPECT_EQ(s.tr.type, 0x3);
  EXPECT_EQ(s.ldt.type, 0x2);
  EXPECT_EQ(s.gdt.limit, 0xFFFF);
  EXPECT_EQ(s.idt.limit, 0xFFFF);
  // CS.base + IP is the reset vector 16 bytes below 4 GiB.
  EXPECT_EQ(s.cs.base + kResetRip, 0xFFFFFFF0u);

  kvm_regs r = reset_regs(0x000806F8);
  EXPECT_EQ(r.rip, 0xFFF0u);
  EXPECT_EQ(r.rflags, 0x2u);
  EXPECT_EQ(r.rdx, 0x000806F8u);
  EXPECT_EQ(r.rax, 0u);
  EXPECT_EQ(r.rsp, 0u);
}

}  // namespace
}  // namespace tern::x86
