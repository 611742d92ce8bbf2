// Machine: what the control loop needs from a built VM. Vm (through VmMachine) implements it for
// real; tests implement it with a fake to drive the lifecycle without KVM.
#pragma once

#include "stats/stats_source.h"
#include "vcpu/stop_event.h"

namespace tern {

/// A built, not yet started VM. Every call except wait_stopped() and stop() comes from the control
/// thread.
class Machine {
 public:
  virtual ~Machine() = default;
  /// Starts the vCPUs and devices; returns at once.
  virtual void start() = 0;
  /// Blocks (on a helper thread) until the VM stops; returns the first reason.
  virtual StopEvent wait_stopped() = 0;
  /// Asks the VM to stop with `e` (thread-safe).
  virtual void stop(StopEvent e) = 0;
  /// After wait_stopped() returned: joins vCPUs, flushes the console.
  virtual void finish() = 0;
  /// Parks all vCPUs; returns when they are parked.
  virtual void pause() = 0;
  virtual void resume() = 0;
  /// Types Ctrl+Alt+Del on the guest's keyboard; false if it cannot take it now.
  virtual bool send_ctrl_alt_del() = 0;
  /// The VM's statistics (GET /tern/stats, /tern/metrics).
  [[nodiscard]] virtual const StatsSource& stats() const = 0;
};

}  // namespace tern
