// Per-vCPU CPUID: KVM_GET_SUPPORTED_CPUID with the APIC ID and topology of each vCPU filled in.
#pragma once

#include <linux/kvm.h>

#include <cstdint>
#include <vector>

namespace tern::x86 {

/// Returns `supported` (from KVM_GET_SUPPORTED_CPUID) adjusted for vCPU `apic_id` of `num_vcpus`,
/// all presented as cores of one socket with one thread each:
/// - leaf 0x1: EBX[31:24] initial APIC ID, EBX[23:16] logical count, EDX.HTT when > 1 CPU,
///   ECX[31] hypervisor present;
/// - leaves 0xB / 0x1F: SMT level (1 thread) and core level (`num_vcpus`), EDX = x2APIC ID;
/// - leaf 0x4 (Intel): EAX[31:26] cores per package − 1, EAX[25:14] = 0 (no cache sharing by SMT);
/// - leaf 0x80000008 (AMD): ECX[7:0] cores − 1 and ECX[15:12] APIC ID size;
/// - leaf 0x8000001E (AMD): EAX extended APIC ID, EBX core ID with 1 thread per core;
/// - leaf 0x1 ECX[24] TSC-deadline timer when `tsc_deadline_timer` (KVM_CAP_TSC_DEADLINE_TIMER:
///   KVM emulates it but leaves advertising it to userspace; without it Linux calibrates the
///   LAPIC timer against the PIT, which fails in nested guests, and falls back to the PIT);
/// - leaf 0xD made consistent with the feature flags (see cpuid.cc).
[[nodiscard]] std::vector<kvm_cpuid_entry2> vcpu_cpuid(std::vector<kvm_cpuid_entry2> supported,
                                                       uint32_t apic_id, uint32_t num_vcpus,
                                                       bool tsc_deadline_timer = false);

}  // namespace tern::x86
