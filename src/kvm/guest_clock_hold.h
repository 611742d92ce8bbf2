// GuestClockHold: stops the guest's kvmclock while tern holds the vCPUs (a pause, a restored VM
// waiting for its resume), as QEMU's kvmclock does (KVM_GET_CLOCK at VM stop, KVM_SET_CLOCK at
// VM start). Without it the guest's CLOCK_MONOTONIC jumps by the whole stop at the next run:
// systemd kills a service whose watchdog ping is 3 min late ("systemd-journald.service:
// Watchdog timeout"), timers fire in a burst. Only the kvmclock stops: the guest TSC runs on
// (a guest whose clocksource is the TSC still sees the stop; KVM_KVMCLOCK_CTRL keeps its
// soft-lockup watchdog quiet).
#pragma once

#include <cstdint>
#include <optional>

#include "base/result.h"
#include "kvm/kvm_vm.h"

namespace tern {

class GuestClockHold {
 public:
  /// KVM_GET_CLOCK: remembers the kvmclock now (every vCPU must be out of KVM_RUN and stay so
  /// until release()). A second hold() keeps the first value. Errors: the ioctl's.
  [[nodiscard]] Result<void> hold(const KvmVm& vm);
  /// Holds `clock_ns` (a restored VM: the kvmclock its snapshot saved) without asking KVM.
  void hold_at(uint64_t clock_ns) { held_ns_ = clock_ns; }
  /// KVM_SET_CLOCK back to the held value (flags 0) and forgets it, before any vCPU runs again:
  /// the guest's kvmclock goes on from where it stood. No-op when nothing is held. The value is
  /// forgotten on error too (the vCPUs run on with KVM's clock; the next hold() takes the clock
  /// then). Errors: the ioctl's.
  [[nodiscard]] Result<void> release(KvmVm& vm);
  /// The held kvmclock in ns, if any (a snapshot of a held VM saves this value).
  [[nodiscard]] std::optional<uint64_t> held_ns() const { return held_ns_; }

 private:
  std::optional<uint64_t> held_ns_;
};

}  // namespace tern
