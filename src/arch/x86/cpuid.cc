#include "arch/x86/cpuid.h"

namespace tern::x86 {

namespace {
/// Bits needed to hold IDs 0..n-1.
uint32_t id_bits(uint32_t n) {
  uint32_t b = 0;
  while ((1u << b) < n) ++b;
  return b;
}
}  // namespace

std::vector<kvm_cpuid_entry2> vcpu_cpuid(std::vector<kvm_cpuid_entry2> entries, uint32_t apic_id,
                                         uint32_t num_vcpus) {
  const uint32_t core_bits = id_bits(num_vcpus);
  for (auto& e : entries) {
    switch (e.function) {
      case 0x1:
        e.ebx = (e.ebx & 0x0000ffffu) | (apic_id << 24) | ((num_vcpus & 0xffu) << 16);
        if (num_vcpus > 1) e.edx |= 1u << 28;
        else e.edx &= ~(1u << 28);
        e.ecx |= 1u << 31;
        break;
      case 0xB:
      case 0x1F:
        if (e.index == 0) {  // SMT level
          e.eax = 0;
          e.ebx = 1;
          e.ecx = (1u << 8) | 0;
        } else if (e.index == 1) {  // core level
          e.eax = core_bits;
          e.ebx = num_vcpus;
          e.ecx = (2u << 8) | 1;
        } else {  // invalid level
          e.eax = 0;
          e.ebx = 0;
          e.ecx = e.index;
        }
        e.edx = apic_id;
        break;
      case 0x4:
        if ((e.eax & 0x1f) != 0) e.eax = (e.eax & 0x3fffu) | ((num_vcpus - 1) << 26);
        break;
      case 0x80000008:
        e.ecx = (e.ecx & ~0xf0ffu) | ((num_vcpus - 1) & 0xffu) | (core_bits << 12);
        break;
      case 0x8000001E:
        e.eax = apic_id;
        e.ebx = (e.ebx & ~0xff00u & ~0xffu) | (apic_id & 0xffu);  // 1 thread per core
        break;
      default:
        break;
    }
  }
  return entries;
}

}  // namespace tern::x86
