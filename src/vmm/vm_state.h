// VmState: the lifecycle of the VM the control loop owns.
#pragma once

namespace tern {

/// not started → running ⇄ paused → stopped. Only the control thread changes it.
enum class VmState { kNotStarted, kRunning, kPaused, kStopped };

/// Firecracker's names ("Not started", "Running", "Paused") plus tern's "Stopped".
inline const char* vm_state_name(VmState s) {
  switch (s) {
    case VmState::kNotStarted: return "Not started";
    case VmState::kRunning: return "Running";
    case VmState::kPaused: return "Paused";
    case VmState::kStopped: return "Stopped";
  }
  return "?";
}

}  // namespace tern
