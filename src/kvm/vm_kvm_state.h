// VmKvmState: the VM-wide state KVM holds for an x86 VM with an in-kernel irqchip and PIT — the
// two 8259 PICs, the IOAPIC, the i8254 PIT and the kvmclock — with save/restore and a byte codec.
#pragma once

#include <linux/kvm.h>

#include "base/result.h"
#include "kvm/kvm_vm.h"
#include "snapshot/codec.h"

namespace tern {

/// Each field as the matching KVM_GET_* ioctl returns it.
struct VmKvmState {
  kvm_irqchip pic_master{};  ///< chip_id KVM_IRQCHIP_PIC_MASTER (0)
  kvm_irqchip pic_slave{};   ///< chip_id KVM_IRQCHIP_PIC_SLAVE (1)
  kvm_irqchip ioapic{};      ///< chip_id KVM_IRQCHIP_IOAPIC (2)
  kvm_pit_state2 pit{};
  kvm_clock_data clock{};  ///< clock = kvmclock in ns at save time
};

/// Reads the irqchips, the PIT and the kvmclock of `vm` (needs create_irqchip() and
/// create_pit2(); every vCPU stopped so the state is one instant's).
Result<VmKvmState> save_vm_kvm_state(KvmVm& vm);

/// Applies `s` to a freshly configured `vm` (irqchip and PIT created, memory mapped) BEFORE any
/// vCPU's state is restored or any vCPU runs. Order:
///   1. KVM_SET_IRQCHIP master PIC, slave PIC, IOAPIC; 2. KVM_SET_PIT2 — after the irqchips,
///      since the restored PIT re-arms its timer and injects IRQ0 into them.
///   3. KVM_SET_CLOCK last, with flags = 0: the kvmclock reads exactly s.clock.clock ns from now
///      on (KVM_CLOCK_TSC_STABLE is output-only and older kernels refuse any flag;
///      KVM_CLOCK_REALTIME would add the wall time the VM spent saved). It must precede every
///      vCPU run: a guest reading kvmclock earlier would see the new VM's near-zero time and then
///      a jump (backwards for Linux' monotonic clock). It must also precede the vCPUs' MSR
///      restore: writing MSR_KVM_WALL_CLOCK_NEW stores a wall clock derived from the VM's
///      kvmclock into guest memory, and MSR_KVM_SYSTEM_TIME_NEW schedules a pvclock update
///      that must use the restored clock.
Result<void> restore_vm_kvm_state(KvmVm& vm, const VmKvmState& s);

/// Appends `s` to `w` (raw KVM structs in host ABI layout).
void encode_vm_kvm_state(snap::ByteWriter& w, const VmKvmState& s);
/// Reads what encode_vm_kvm_state() wrote; refuses truncated input and irqchip records whose
/// chip_id is not the expected 0, 1, 2. Does not check that `r` is then at its end.
Result<VmKvmState> decode_vm_kvm_state(snap::ByteReader& r);

}  // namespace tern
