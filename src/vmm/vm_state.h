// The VM's lifecycle: its states and every legal transition, as one table (vm_state.cc). The
// control loop checks each request against it and changes state only through it.
#pragma once

#include <optional>

namespace tern {

/// Where the VM is. Only the control thread changes it.
enum class VmState {
  kNotStarted,  ///< No VM, nothing configured ("Not started").
  kConfigured,  ///< Pre-boot configuration given (CLI, config file or API); no VM ("Not started").
  kRunning,     ///< vCPUs running ("Running").
  kPaused,      ///< vCPUs parked ("Paused").
  kRestored,    ///< Rebuilt from a snapshot, vCPU threads not yet started ("Paused").
  kSaving,      ///< A snapshot save runs on its own thread; the VM stays paused ("Paused").
  kStopping,    ///< Power-off requested; waiting for the vCPUs to stop (shown as before).
  kStopped,     ///< The guest stopped; tern is exiting ("Stopped").
};

/// What moves the VM between states.
enum class VmEvent {
  kConfigure,     ///< PUT /boot-source, /machine-config, /drives, /entropy; configure().
  kStart,         ///< InstanceStart; `tern run`, --config-file.
  kRestore,       ///< PUT /snapshot/load, `tern restore`.
  kPause,         ///< PATCH /vm Paused.
  kResume,        ///< PATCH /vm Resumed (a restored VM's vCPUs start here).
  kCtrlAltDel,    ///< SendCtrlAltDel.
  kSaveBegin,     ///< PUT /snapshot/create accepted.
  kSaveEnd,       ///< The save finished (done, failed or cancelled).
  kPowerOff,      ///< PUT /tern/power-off.
  kGuestStopped,  ///< The vCPUs stopped (guest reboot/shutdown, power-off, signal, error).
};

/// The state machine: the current state plus, for kSaving and kStopping, the state they came
/// from (a save returns to it; a stopping VM is shown as it).
class VmLifecycle {
 public:
  [[nodiscard]] VmState state() const { return state_; }
  /// Whether `e` is legal now.
  [[nodiscard]] bool allows(VmEvent e) const { return next(e).has_value(); }
  /// Applies `e` (which must be allowed: a programming error otherwise). Returns true when the
  /// shown name changed (then a "state" event is published).
  bool apply(VmEvent e);
  /// Firecracker's names ("Not started", "Running", "Paused") plus tern's "Stopped".
  [[nodiscard]] const char* name() const;
  /// A VM exists (built or restored, not yet stopped).
  [[nodiscard]] bool has_vm() const;

 private:
  [[nodiscard]] std::optional<VmState> next(VmEvent e) const;
  VmState state_ = VmState::kNotStarted;
  VmState from_ = VmState::kNotStarted;  // before kSaving / kStopping
};

/// The shown name of a state (kSaving and kStopping as the state they came from: see VmLifecycle).
const char* vm_state_name(VmState s);

}  // namespace tern
