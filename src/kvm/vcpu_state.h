// VcpuState: everything KVM holds for one x86 vCPU that a snapshot must carry, with save/restore
// through the KVM vCPU ioctls and a byte codec for the state file.
//
// Not included: CPUID (the restoring VMM sets it from its own configuration before
// restore_vcpu_state; KVM validates MSRs, XSAVE and XCR0 against it), nested state (tern does not
// expose VMX/SVM to guests) and any pending PIO/MMIO exit (the caller completes it first: see
// KvmVcpu::complete_pending_io()).
#pragma once

#include <linux/kvm.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "kvm/kvm_system.h"
#include "kvm/kvm_vcpu.h"
#include "snapshot/codec.h"

namespace tern {

/// One vCPU's KVM state, each field as the matching KVM_GET_* ioctl returns it.
struct VcpuState {
  kvm_regs regs{};
  kvm_sregs sregs{};
  std::vector<uint8_t> xsave;  ///< Raw kvm_xsave image (4096 bytes, more with KVM_CAP_XSAVE2).
  kvm_xcrs xcrs{};
  kvm_debugregs debugregs{};
  std::vector<MsrValue> msrs;  ///< In restore order (see snapshot_msr_list()).
  kvm_lapic_state lapic{};
  kvm_mp_state mp_state{};
  kvm_vcpu_events events{};
  uint32_t tsc_khz = 0;  ///< Guest TSC frequency in kHz; 0 = unknown (restore leaves it as is).
};

/// Codec limits: a decoded state with more MSRs or a larger XSAVE image is refused as corrupt.
inline constexpr uint32_t kMaxSnapshotMsrs = 4096;
inline constexpr uint32_t kMaxXsaveBytes = 1u << 20;

/// Which MSRs a snapshot saves, computed once per VM: KVM_GET_MSR_INDEX_LIST plus the MTRRs
/// (KVM emulates and QEMU migrates them, but the list omits them), filtered to the MSRs
/// KVM_GET_MSRS actually reads on `probe` (a vCPU of this VM, CPUID already set), sorted by index
/// with MSR_IA32_TSC_DEADLINE moved last. Why: KVM arms the LAPIC timer from a deadline written
/// as an absolute guest-TSC value, relative to the guest TSC at the time of the write; a later
/// host write to MSR_IA32_TSC (which moves the guest TSC to the saved value) would leave the
/// timer armed for the wrong moment. Errors: the index list or KVM_GET_MSRS ioctl failing.
Result<std::vector<uint32_t>> snapshot_msr_list(const KvmSystem& sys, KvmVcpu& probe);

/// Reads `v`'s state (the vCPU must not be running; pending PIO/MMIO completed) with the MSRs
/// `msr_indices` (from snapshot_msr_list()). Fails naming the first MSR KVM did not read.
Result<VcpuState> save_vcpu_state(KvmVcpu& v, std::span<const uint32_t> msr_indices);

/// Applies `s` to `v` (not running, CPUID already set, VM state already restored with
/// restore_vm_kvm_state()) in this order, each step for the reason given:
///   1. KVM_SET_TSC_KHZ, only when s.tsc_khz != 0 and differs from v's: KVM converts the
///      MSR_IA32_TSC write in step 9 with the vCPU's TSC scaling ratio.
///   2. KVM_SET_MP_STATE: on a fresh vCPU (not in SMM, no latched INIT) KVM accepts every state;
///      step 10 may put the vCPU in SMM, where INIT/SIPI-received states are refused.
///   3. KVM_SET_REGS, 4. KVM_SET_SREGS (control registers, EFER, segments and apic_base: the
///      APIC mode step 8 interprets the LAPIC registers in).
///   5. KVM_SET_XSAVE, 6. KVM_SET_XCRS, 7. KVM_SET_DEBUGREGS (independent of each other).
///   8. KVM_SET_LAPIC before the MSRs: KVM ignores an MSR_IA32_TSC_DEADLINE write unless the LAPIC
///      timer is in TSC-deadline mode, and MSR_KVM_PV_EOI_EN needs the LAPIC.
///   9. KVM_SET_MSRS in s.msrs order (MSR_IA32_TSC_DEADLINE after MSR_IA32_TSC, see above;
///      kvmclock MSRs after step 1 and after KVM_SET_CLOCK). A call that accepts fewer entries
///      than given is an error naming the first rejected MSR.
///  10. KVM_SET_VCPU_EVENTS last: pending/injected exception, NMI, SMI/SMM state, interrupt
///      shadow. KVM_SET_REGS discards a pending exception and KVM_SET_SREGS can queue an
///      interrupt, so events written earlier would be lost or doubled.
///  11. KVM_KVMCLOCK_CTRL (KvmVcpu::kvmclock_ctrl()), after step 9 turned kvmclock on: the
///      guest's soft-lockup watchdog then takes the time from the save to the first run for a
///      host stop, not for a hung CPU (QEMU does the same at every VM start).
Result<void> restore_vcpu_state(KvmVcpu& v, const VcpuState& s);

/// One log line of what `s` holds of the guest's time: MSR_IA32_TSC, tsc_khz, TSC_DEADLINE, the
/// LAPIC timer (LVT Timer mode and mask, initial and current count) and whether kvmclock
/// (MSR_KVM_SYSTEM_TIME_NEW bit 0) is on, e.g. "tsc=... khz=... deadline=... lvtt=tsc-deadline
/// tmict=0 tmcct=0 kvmclock=on". An MSR the state lacks reads "-".
[[nodiscard]] std::string vcpu_time_summary(const VcpuState& s);

/// Appends `s` to `w` (raw KVM structs in host ABI layout; tern restores on the same ABI).
void encode_vcpu_state(snap::ByteWriter& w, const VcpuState& s);
/// Reads what encode_vcpu_state() wrote. Refuses (error naming the field) truncated input,
/// more than kMaxSnapshotMsrs MSRs, an XSAVE image under 4096 or over kMaxXsaveBytes bytes,
/// and kvm_xcrs.nr_xcrs > KVM_MAX_XCRS. Does not check that `r` is then at its end.
Result<VcpuState> decode_vcpu_state(snap::ByteReader& r);

}  // namespace tern
