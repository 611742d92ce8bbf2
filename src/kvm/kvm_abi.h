// Fixed-layout headers and ioctl numbers for KVM calls that take variable-length arrays.
//
// Debian 12's linux-libc-dev declares flexible array members with __DECLARE_FLEX_ARRAY, which in
// C++ puts an empty struct (sizeof 1) before the array. That shifts the array (kvm_cpuid2.entries
// lands at offset 12 instead of 8, kvm_msrs.entries at 16 instead of 8) and changes sizeof, and
// so the ioctl numbers built from sizeof: KVM_GET_SUPPORTED_CPUID, KVM_SET_CPUID2, KVM_SET_MSRS
// ... come out wrong and KVM answers EINVAL. tern uses these headers and numbers instead; the
// static_asserts pin them to the kernel ABI. Affected too, for later users: kvm_irq_routing
// (KVM_SET_GSI_ROUTING), kvm_xsave (KVM_GET_XSAVE2), kvm_stats_desc.
#pragma once

#include <linux/kvm.h>
#include <sys/ioctl.h>

#include <cstddef>
#include <cstdint>

namespace tern::kvm_abi {

struct Cpuid2Header {  ///< struct kvm_cpuid2 without its entries[] (kvm_cpuid_entry2[nent]).
  uint32_t nent;
  uint32_t padding;
};
struct MsrsHeader {  ///< struct kvm_msrs without its entries[] (kvm_msr_entry[nmsrs]).
  uint32_t nmsrs;
  uint32_t pad;
};
struct MsrListHeader {  ///< struct kvm_msr_list without its indices[] (uint32_t[nmsrs]).
  uint32_t nmsrs;
};
/// struct kvm_xsave without its extra[] tail: the 4096-byte legacy region. KVM_GET_XSAVE2 writes,
/// and KVM_SET_XSAVE reads, KVM_CHECK_EXTENSION(KVM_CAP_XSAVE2) bytes (>= 4096) from the same
/// pointer; the ioctl numbers encode 4096 (Debian's C++ sizeof(kvm_xsave) is 4100).
struct XsaveRegion {
  uint32_t region[1024];
};
struct IrqRoutingHeader {  ///< struct kvm_irq_routing without entries[] (kvm_irq_routing_entry[nr]).
  uint32_t nr;
  uint32_t flags;
};

inline constexpr unsigned long kGetMsrIndexList = _IOWR(KVMIO, 0x02, MsrListHeader);
inline constexpr unsigned long kGetSupportedCpuid = _IOWR(KVMIO, 0x05, Cpuid2Header);
inline constexpr unsigned long kSetGsiRouting = _IOW(KVMIO, 0x6a, IrqRoutingHeader);
inline constexpr unsigned long kGetMsrs = _IOWR(KVMIO, 0x88, MsrsHeader);
inline constexpr unsigned long kSetMsrs = _IOW(KVMIO, 0x89, MsrsHeader);
inline constexpr unsigned long kSetCpuid2 = _IOW(KVMIO, 0x90, Cpuid2Header);
inline constexpr unsigned long kGetXsave = _IOR(KVMIO, 0xa4, XsaveRegion);
inline constexpr unsigned long kSetXsave = _IOW(KVMIO, 0xa5, XsaveRegion);
inline constexpr unsigned long kGetXsave2 = _IOR(KVMIO, 0xcf, XsaveRegion);
/// Bytes KVM_GET_XSAVE transfers (and the minimum KVM_CAP_XSAVE2 reports).
inline constexpr size_t kXsaveLegacyBytes = sizeof(XsaveRegion);

static_assert(sizeof(kvm_cpuid_entry2) == 40);
static_assert(sizeof(kvm_msr_entry) == 16);
static_assert(kGetSupportedCpuid == 0xc008ae05);
static_assert(kSetCpuid2 == 0x4008ae90);
static_assert(kSetMsrs == 0x4008ae89);
static_assert(kGetMsrs == 0xc008ae88);
static_assert(kGetMsrIndexList == 0xc004ae02);
static_assert(kSetGsiRouting == 0x4008ae6a);
static_assert(sizeof(XsaveRegion) == 4096);
static_assert(kGetXsave == 0x9000aea4);
static_assert(kSetXsave == 0x5000aea5);
static_assert(kGetXsave2 == 0x9000aecf);

}  // namespace tern::kvm_abi
