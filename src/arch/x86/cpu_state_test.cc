#include "arch/x86/cpu_state.h"

#include <gtest/gtest.h>

#include "arch/x86/layout.h"

namespace tern::x86 {
namespace {

// pvh.pandoc's entry state: CR0.PE (ET is read-only 1), paging off, CR4 = 0, a flat 32-bit
// read/execute CS, flat read/write data segments, a 32-bit TSS in TR with base 0, limit 0x67.
TEST(PvhSregs, ProtectedModeFlat32) {
  kvm_sregs base{};
  base.apic_base = 0xfee00900;  // kept from KVM_GET_SREGS
  const kvm_sregs s = pvh_sregs(base);
  EXPECT_EQ(s.cr0, 0x11u);
  EXPECT_EQ(s.cr3, 0u);
  EXPECT_EQ(s.cr4, 0u);
  EXPECT_EQ(s.efer, 0u);
  EXPECT_EQ(s.apic_base, 0xfee00900u);
  EXPECT_EQ(s.cs.selector, kPvhCsSelector);
  EXPECT_EQ(s.cs.base, 0u);
  EXPECT_EQ(s.cs.limit, 0xffffffffu);
  EXPECT_EQ(s.cs.type, 0xbu);  // execute/read, accessed
  EXPECT_EQ(s.cs.s, 1u);
  EXPECT_EQ(s.cs.present, 1u);
  EXPECT_EQ(s.cs.db, 1u);
  EXPECT_EQ(s.cs.l, 0u);
  EXPECT_EQ(s.cs.g, 1u);
  for (const kvm_segment* d : {&s.ds, &s.es, &s.fs, &s.gs, &s.ss}) {
    EXPECT_EQ(d->selector, kBootDsSelector);
    EXPECT_EQ(d->base, 0u);
    EXPECT_EQ(d->limit, 0xffffffffu);
    EXPECT_EQ(d->type, 0x3u);  // read/write, accessed
    EXPECT_EQ(d->db, 1u);
    EXPECT_EQ(d->present, 1u);
  }
  EXPECT_EQ(s.tr.selector, kBootTssSelector);
  EXPECT_EQ(s.tr.type, 0xbu);  // busy 32-bit TSS
  EXPECT_EQ(s.tr.s, 0u);
  EXPECT_EQ(s.tr.base, 0u);
  EXPECT_EQ(s.tr.limit, 0x67u);
  EXPECT_EQ(s.gdt.base, kGdtAddr);
  EXPECT_GE(s.gdt.limit + 1u, kPvhCsSelector + 8u);
}

// The 64-bit path is unchanged by the extra descriptor: CS 0x10 is a long-mode segment.
TEST(LongModeSregs, StillLongMode) {
  const kvm_sregs s = long_mode_sregs(kvm_sregs{});
  EXPECT_EQ(s.cs.selector, kBootCsSelector);
  EXPECT_EQ(s.cs.l, 1u);
  EXPECT_EQ(s.cs.db, 0u);
  EXPECT_EQ(s.efer & 0x500u, 0x500u);
}

}  // namespace
}  // namespace tern::x86
