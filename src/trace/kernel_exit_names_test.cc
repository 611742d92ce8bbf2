// The name tables of KernelExitTrace: exit reasons as the kernel's kvm_exit tracepoint prints them
// (SVM and VMX), MSR names, NPF kinds.
#include <gtest/gtest.h>

#include "trace/kernel_exit_trace.h"

namespace tern {
namespace {

TEST(KernelExitReasonName, SvmCodesAsTheTracepointPrintsThem) {
  EXPECT_EQ(kernel_exit_reason_name(ExitIsa::kSvm, 0x400), "npf");
  EXPECT_EQ(kernel_exit_reason_name(ExitIsa::kSvm, 0x07c), "msr");
  EXPECT_EQ(kernel_exit_reason_name(ExitIsa::kSvm, 0x07b), "io");
  EXPECT_EQ(kernel_exit_reason_name(ExitIsa::kSvm, 0x078), "hlt");
  EXPECT_EQ(kernel_exit_reason_name(ExitIsa::kSvm, 0x072), "cpuid");
  EXPECT_EQ(kernel_exit_reason_name(ExitIsa::kSvm, 0x064), "vintr");
  EXPECT_EQ(kernel_exit_reason_name(ExitIsa::kSvm, 0x060), "interrupt");
  EXPECT_EQ(kernel_exit_reason_name(ExitIsa::kSvm, 0x04e), "PF excp");
  EXPECT_EQ(kernel_exit_reason_name(ExitIsa::kSvm, 0x081), "hypercall");
  EXPECT_EQ(kernel_exit_reason_name(ExitIsa::kSvm, 0x401), "avic_incomplete_ipi");
  EXPECT_EQ(kernel_exit_reason_name(ExitIsa::kSvm, 0xffffffffu), "invalid_guest_state");
}

TEST(KernelExitReasonName, VmxBasicReasonsAsTheTracepointPrintsThem) {
  EXPECT_EQ(kernel_exit_reason_name(ExitIsa::kVmx, 48), "EPT_VIOLATION");
  EXPECT_EQ(kernel_exit_reason_name(ExitIsa::kVmx, 49), "EPT_MISCONFIG");
  EXPECT_EQ(kernel_exit_reason_name(ExitIsa::kVmx, 32), "MSR_WRITE");
  EXPECT_EQ(kernel_exit_reason_name(ExitIsa::kVmx, 31), "MSR_READ");
  EXPECT_EQ(kernel_exit_reason_name(ExitIsa::kVmx, 1), "EXTERNAL_INTERRUPT");
  EXPECT_EQ(kernel_exit_reason_name(ExitIsa::kVmx, 30), "IO_INSTRUCTION");
  EXPECT_EQ(kernel_exit_reason_name(ExitIsa::kVmx, 12), "HLT");
  EXPECT_EQ(kernel_exit_reason_name(ExitIsa::kVmx, 10), "CPUID");
  EXPECT_EQ(kernel_exit_reason_name(ExitIsa::kVmx, 52), "PREEMPTION_TIMER");
  // The flag bits (FAILED_VMENTRY) are not part of the basic reason.
  EXPECT_EQ(kernel_exit_reason_name(ExitIsa::kVmx, 0x80000021), "INVALID_STATE");
}

TEST(KernelExitReasonName, UnknownCodesInHex) {
  EXPECT_EQ(kernel_exit_reason_name(ExitIsa::kSvm, 0x3ff), "0x3ff");
  EXPECT_EQ(kernel_exit_reason_name(ExitIsa::kVmx, 1000), "0x3e8");
  EXPECT_EQ(kernel_exit_reason_name(static_cast<ExitIsa>(7), 0x400), "0x400");
}

TEST(ExitIsaName, Names) {
  EXPECT_STREQ(exit_isa_name(ExitIsa::kSvm), "svm");
  EXPECT_STREQ(exit_isa_name(ExitIsa::kVmx), "vmx");
}

TEST(MsrName, X2ApicByRegister) {
  EXPECT_EQ(msr_name(0x80b), "X2APIC_EOI");
  EXPECT_EQ(msr_name(0x830), "X2APIC_ICR");
  EXPECT_EQ(msr_name(0x838), "X2APIC_TMICT");
  EXPECT_EQ(msr_name(0x832), "X2APIC_LVTT");
  EXPECT_EQ(msr_name(0x808), "X2APIC_TPR");
  EXPECT_EQ(msr_name(0x812), "X2APIC_ISR2");
  EXPECT_EQ(msr_name(0x827), "X2APIC_IRR7");
  EXPECT_EQ(msr_name(0x8f0), "X2APIC_0x8f0");
}

TEST(MsrName, WellKnownMsrs) {
  EXPECT_EQ(msr_name(0x6e0), "TSC_DEADLINE");
  EXPECT_EQ(msr_name(0xc0000080), "EFER");
  EXPECT_EQ(msr_name(0xc0000081), "STAR");
  EXPECT_EQ(msr_name(0xc0000082), "LSTAR");
  EXPECT_EQ(msr_name(0xc0000102), "KERNEL_GS_BASE");
  EXPECT_EQ(msr_name(0x1a0), "MISC_ENABLE");
  EXPECT_EQ(msr_name(0xc0010015), "AMD64_HWCR");
  EXPECT_EQ(msr_name(0xc0010007), "AMD64_PERFCTR3");
  EXPECT_EQ(msr_name(0x4b564d01), "KVM_SYSTEM_TIME_NEW");
  EXPECT_EQ(msr_name(0x203), "MTRR_PHYSMASK1");
  EXPECT_EQ(msr_name(0x12345), "");
}

TEST(NpfKindName, Names) {
  EXPECT_STREQ(npf_kind_name(NpfKind::kRamNotPresent), "ram-not-present");
  EXPECT_STREQ(npf_kind_name(NpfKind::kRamOther), "ram-other");
  EXPECT_STREQ(npf_kind_name(NpfKind::kMmioCached), "mmio-cached");
  EXPECT_STREQ(npf_kind_name(NpfKind::kMmioOther), "mmio-other");
}

}  // namespace
}  // namespace tern
