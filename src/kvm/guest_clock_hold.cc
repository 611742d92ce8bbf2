#include "kvm/guest_clock_hold.h"

namespace tern {

Result<void> GuestClockHold::hold(const KvmVm& vm) {
  if (held_ns_) return {};
  ASSIGN_OR_RETURN(kvm_clock_data c, vm.get_clock());
  held_ns_ = c.clock;
  return {};
}

Result<void> GuestClockHold::release(KvmVm& vm) {
  if (!held_ns_) return {};
  kvm_clock_data c{};
  c.clock = *held_ns_;
  c.flags = 0;  // as restore_vm_kvm_state(): no KVM_CLOCK_REALTIME (the stop stays unseen)
  // Forgotten even when KVM_SET_CLOCK fails: the caller lets the vCPUs run all the same, so the
  // value is stale from now on. Kept, the next hold() would keep it too, and the release after
  // that (or a snapshot of that pause) would set the guest's clock back by the time it ran.
  held_ns_.reset();
  return vm.set_clock(c);
}

}  // namespace tern
