#include "arch/x86/cpuid.h"

#include <algorithm>

namespace tern::x86 {

namespace {

const kvm_cpuid_entry2* find(const std::vector<kvm_cpuid_entry2>& v, uint32_t fn, uint32_t idx) {
  for (const auto& e : v)
    if (e.function == fn && e.index == idx) return &e;
  return nullptr;
}

/// Makes leaf 0xD agree with the feature flags: a host KVM (e.g. one nested under an emulator
/// without AVX) can report XSAVE state components whose CPUID feature bit is clear, and Linux
/// then warns "XSAVE consistency problem" and sizes its buffers wrongly. Components without
/// their feature are dropped from 0xD.0 EAX/EDX and the sizes recomputed: EBX = 576 (legacy
/// area + header, XCR0 at reset), ECX = end of the highest supported component.
void fix_xsave_leaf(std::vector<kvm_cpuid_entry2>& entries) {
  const auto* l1 = find(entries, 0x1, 0);
  const auto* l7 = find(entries, 0x7, 0);
  uint32_t ecx1 = l1 ? l1->ecx : 0, ebx7 = l7 ? l7->ebx : 0, ecx7 = l7 ? l7->ecx : 0;
  uint64_t allowed = 0x3;                        // x87, SSE
  if (ecx1 & (1u << 28)) allowed |= 1ull << 2;   // AVX
  if (ebx7 & (1u << 14)) allowed |= 3ull << 3;   // MPX: BNDREGS, BNDCSR
  if (ebx7 & (1u << 16)) allowed |= 7ull << 5;   // AVX-512: opmask, ZMM_Hi256, Hi16_ZMM
  if (ecx7 & (1u << 3)) allowed |= 1ull << 9;    // PKU: PKRU
  allowed |= ~0ull << 10;                        // others (AMX, ...) keep what KVM says
  for (auto& e : entries) {
    if (e.function != 0xD || e.index != 0) continue;
    uint64_t xcr0 = (uint64_t{e.edx} << 32 | e.eax) & allowed;
    e.eax = static_cast<uint32_t>(xcr0);
    e.edx = static_cast<uint32_t>(xcr0 >> 32);
    uint32_t size = 576;
    for (uint32_t i = 2; i < 64; ++i) {
      if (!(xcr0 & (1ull << i))) continue;
      if (const auto* c = find(entries, 0xD, i); c && c->eax != 0)
        size = std::max(size, c->ebx + c->eax);
    }
    e.ebx = 576;
    e.ecx = size;
  }
}

/// Bits needed to hold IDs 0..n-1.
uint32_t id_bits(uint32_t n) {
  uint32_t b = 0;
  while ((1u << b) < n) ++b;
  return b;
}
}  // namespace

std::vector<kvm_cpuid_entry2> vcpu_cpuid(std::vector<kvm_cpuid_entry2> entries, uint32_t apic_id,
                                         uint32_t num_vcpus, bool tsc_deadline_timer) {
  const uint32_t core_bits = id_bits(num_vcpus);
  for (auto& e : entries) {
    switch (e.function) {
      case 0x1:
        e.ebx = (e.ebx & 0x0000ffffu) | (apic_id << 24) | ((num_vcpus & 0xffu) << 16);
        if (num_vcpus > 1) e.edx |= 1u << 28;
        else e.edx &= ~(1u << 28);
        e.ecx |= 1u << 31;
        if (tsc_deadline_timer) e.ecx |= 1u << 24;
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
  fix_xsave_leaf(entries);
  return entries;
}

}  // namespace tern::x86
