// Machine: what the control loop needs from a built VM. Vm (through VmMachine) implements it for
// real; tests implement it with a fake to drive the lifecycle without KVM.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>

#include "config/vm_specs.h"
#include "base/result.h"
#include "stats/stats_source.h"
#include "vcpu/stop_event.h"

namespace tern {

class DeviceActivator;

/// What one snapshot save did (PUT /snapshot/create, `tern snapshot`).
struct SnapshotReport {
  uint64_t total_bytes = 0;    ///< Guest RAM saved (bytes), zero pages included.
  uint64_t written_bytes = 0;  ///< Bytes actually written to the memory file (non-zero pages).
  uint64_t state_bytes = 0;    ///< Size of the state file.
  double seconds = 0;          ///< Whole save: quiesce, state, memory file, state file.
};

/// Called by a save with guest RAM bytes done (zero pages included) and the total.
using SaveProgress = std::function<void(uint64_t done_bytes, uint64_t total_bytes)>;

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
  /// What a guest reset request (StopKind kReboot or kTripleFault) does to this VM: --on-reboot
  /// as given, else the boot's default (BootInputs::default_on_reboot). Any thread.
  [[nodiscard]] virtual OnReboot on_reboot() const { return OnReboot::kExit; }
  /// Reboot in place (docs/lifecycle.md), after wait_stopped() returned a reset request and
  /// finish(): in-flight device work is completed and the writable disks are flushed, then the
  /// guest side of the VM is brought to its power-on state and loaded again (kernel/initrd or
  /// firmware) with the same host resources (disk images and their locks, taps, vhost-user
  /// connections, the console); start() then runs it. The rule every part follows is in
  /// src/vmm/vm.h ("Reset rule"). An error (a flush that failed, a KVM failure while rebuilding)
  /// leaves the machine unusable: the caller ends the VM. Control thread.
  [[nodiscard]] virtual Result<void> reset() {
    return fail("reset", "this VM cannot be reset in place");
  }
  /// Types Ctrl+Alt+Del on the guest's keyboard; false if it cannot take it now.
  virtual bool send_ctrl_alt_del() = 0;
  /// Saves the VM (which the caller has paused) to spec's state and memory files; the VM stays
  /// paused and can resume afterwards. May run on a thread other than the control thread while
  /// the control thread only reads stats. Errors (ENOSPC, EACCES, a failed disk flush, paths that
  /// are the VM's own files...) name the file or field; a failed save leaves the previous files as
  /// they were, no temporary behind, and the VM intact. When `cancel` becomes true the save stops
  /// soon and fails with "cancelled".
  [[nodiscard]] virtual Result<SnapshotReport> save_snapshot(const SnapshotCreateSpec& spec,
                                                             const SaveProgress& progress,
                                                             const std::atomic<bool>& cancel) = 0;
  /// Turns the VM's in-kernel exit accounting on or off (PUT /tern/kernel-exits); the reason when
  /// it cannot be turned on. Control thread.
  [[nodiscard]] virtual Result<void> set_kernel_exits(bool enabled) {
    if (!enabled) return {};
    return fail("in-kernel exit accounting", "not available for this VM");
  }
  /// The VM's statistics (GET /tern/stats, /tern/metrics).
  [[nodiscard]] virtual const StatsSource& stats() const = 0;
  /// Where the VM's devices hand activation/reset to the control thread (null: none; they run
  /// it inline). The control loop attaches to it (device_activator.h).
  [[nodiscard]] virtual DeviceActivator* activator() { return nullptr; }
};

}  // namespace tern
