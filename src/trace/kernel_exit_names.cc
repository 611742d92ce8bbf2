// Names for KernelExitTrace's rows: exit reasons straight from the kernel's uapi tables (the same
// SVM_EXIT_REASONS / VMX_EXIT_REASONS that the kvm_exit tracepoint prints with), well-known MSRs,
// NPF kinds.
#include <asm/svm.h>
#include <asm/vmx.h>

#include <cstdio>

#include "trace/kernel_exit_trace.h"

namespace tern {
namespace {

struct CodeName {
  long long code;  // SVM_EXIT_ERR is -1: compared as uint32_t
  const char* name;
};

// The exception vectors SVM_EXIT_REASONS adds to SVM_EXIT_EXCP_BASE (the kernel's <asm/trapnr.h>,
// not exported to uapi).
enum : int {
  DE_VECTOR = 0,
  DB_VECTOR = 1,
  BP_VECTOR = 3,
  OF_VECTOR = 4,
  BR_VECTOR = 5,
  UD_VECTOR = 6,
  NM_VECTOR = 7,
  DF_VECTOR = 8,
  TS_VECTOR = 10,
  NP_VECTOR = 11,
  SS_VECTOR = 12,
  GP_VECTOR = 13,
  PF_VECTOR = 14,
  MF_VECTOR = 16,
  AC_VECTOR = 17,
  MC_VECTOR = 18,
  XM_VECTOR = 19,
};

constexpr CodeName kSvmReasons[] = {SVM_EXIT_REASONS};
constexpr CodeName kVmxReasons[] = {VMX_EXIT_REASONS};

std::string hex(uint32_t v) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%x", v);
  return b;
}

struct MsrName {
  uint32_t msr;
  const char* name;
};

// Architectural and AMD MSRs a Linux guest touches most; x2APIC (0x800-0x8ff) by register below.
constexpr MsrName kMsrs[] = {
    {0x10, "TSC"},
    {0x1b, "APIC_BASE"},
    {0x3a, "FEATURE_CONTROL"},
    {0x48, "SPEC_CTRL"},
    {0x49, "PRED_CMD"},
    {0x8b, "MICROCODE_REV"},
    {0xe7, "MPERF"},
    {0xe8, "APERF"},
    {0xfe, "MTRRCAP"},
    {0x10a, "ARCH_CAPABILITIES"},
    {0x174, "SYSENTER_CS"},
    {0x175, "SYSENTER_ESP"},
    {0x176, "SYSENTER_EIP"},
    {0x179, "MCG_CAP"},
    {0x17a, "MCG_STATUS"},
    {0x1a0, "MISC_ENABLE"},
    {0x1d9, "DEBUGCTL"},
    {0x277, "PAT"},
    {0x2ff, "MTRR_DEF_TYPE"},
    {0x6e0, "TSC_DEADLINE"},
    {0xc0000080, "EFER"},
    {0xc0000081, "STAR"},
    {0xc0000082, "LSTAR"},
    {0xc0000083, "CSTAR"},
    {0xc0000084, "SYSCALL_MASK"},
    {0xc0000100, "FS_BASE"},
    {0xc0000101, "GS_BASE"},
    {0xc0000102, "KERNEL_GS_BASE"},
    {0xc0000103, "TSC_AUX"},
    {0xc0010007, "AMD64_PERFCTR3"},
    {0xc0010010, "AMD64_SYSCFG"},
    {0xc0010015, "AMD64_HWCR"},
    {0xc001001f, "AMD64_NB_CFG"},
    {0xc0010058, "AMD64_MMCONF_BASE"},
    {0xc0010114, "VM_CR"},
    {0xc0010117, "VM_HSAVE_PA"},
    {0xc0011020, "AMD64_LS_CFG"},
    {0xc0011029, "AMD64_DE_CFG"},
    {0x4b564d00, "KVM_WALL_CLOCK_NEW"},
    {0x4b564d01, "KVM_SYSTEM_TIME_NEW"},
    {0x4b564d02, "KVM_ASYNC_PF_EN"},
    {0x4b564d03, "KVM_STEAL_TIME"},
    {0x4b564d04, "KVM_PV_EOI_EN"},
    {0x4b564d05, "KVM_POLL_CONTROL"},
    {0x4b564d06, "KVM_ASYNC_PF_INT"},
    {0x4b564d07, "KVM_ASYNC_PF_ACK"},
};

// x2APIC MSR 0x800 + (xAPIC MMIO offset >> 4).
constexpr MsrName kX2Apic[] = {
    {0x802, "X2APIC_ID"},     {0x803, "X2APIC_VERSION"},  {0x808, "X2APIC_TPR"},
    {0x80a, "X2APIC_PPR"},    {0x80b, "X2APIC_EOI"},      {0x80d, "X2APIC_LDR"},
    {0x80f, "X2APIC_SPIV"},   {0x828, "X2APIC_ESR"},      {0x82f, "X2APIC_LVTCMCI"},
    {0x830, "X2APIC_ICR"},    {0x832, "X2APIC_LVTT"},     {0x833, "X2APIC_LVTTHMR"},
    {0x834, "X2APIC_LVTPC"},  {0x835, "X2APIC_LVT0"},     {0x836, "X2APIC_LVT1"},
    {0x837, "X2APIC_LVTERR"}, {0x838, "X2APIC_TMICT"},    {0x839, "X2APIC_TMCCT"},
    {0x83e, "X2APIC_TDCR"},   {0x83f, "X2APIC_SELF_IPI"},
};

const char* find(const MsrName* begin, const MsrName* end, uint32_t msr) {
  for (const MsrName* m = begin; m != end; ++m)
    if (m->msr == msr) return m->name;
  return nullptr;
}

}  // namespace

std::string kernel_exit_reason_name(ExitIsa isa, uint32_t code) {
  if (isa == ExitIsa::kSvm) {
    for (const auto& r : kSvmReasons)
      if (static_cast<uint32_t>(r.code) == code) return r.name;
  } else if (isa == ExitIsa::kVmx) {
    for (const auto& r : kVmxReasons)
      if (static_cast<uint32_t>(r.code) == (code & 0xffff)) return r.name;
  }
  return hex(code);
}

const char* exit_isa_name(ExitIsa isa) {
  return isa == ExitIsa::kVmx ? "vmx" : "svm";
}

std::string msr_name(uint32_t msr) {
  if (msr >= 0x800 && msr <= 0x8ff) {
    if (const char* n = find(std::begin(kX2Apic), std::end(kX2Apic), msr)) return n;
    if (msr >= 0x810 && msr <= 0x817) return "X2APIC_ISR" + std::to_string(msr - 0x810);
    if (msr >= 0x818 && msr <= 0x81f) return "X2APIC_TMR" + std::to_string(msr - 0x818);
    if (msr >= 0x820 && msr <= 0x827) return "X2APIC_IRR" + std::to_string(msr - 0x820);
    return "X2APIC_" + hex(msr);
  }
  if (msr >= 0x200 && msr <= 0x20f)
    return std::string((msr & 1) ? "MTRR_PHYSMASK" : "MTRR_PHYSBASE") +
           std::to_string((msr - 0x200) / 2);
  if (const char* n = find(std::begin(kMsrs), std::end(kMsrs), msr)) return n;
  return "";
}

const char* npf_kind_name(NpfKind kind) {
  switch (kind) {
    case NpfKind::kRamNotPresent:
      return "ram-not-present";
    case NpfKind::kRamOther:
      return "ram-other";
    case NpfKind::kMmioCached:
      return "mmio-cached";
    case NpfKind::kMmioOther:
      return "mmio-other";
  }
  return "?";
}

}  // namespace tern
