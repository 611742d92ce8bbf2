// The exit statuses of `tern run` (documented in README.md and docs/cli.md).
#pragma once

#include "vcpu/stop_event.h"

namespace tern {

inline constexpr int kExitPowerOff = 0;       ///< The guest powered off.
inline constexpr int kExitError = 1;          ///< tern failed: bad input or setup error.
inline constexpr int kExitNoHwVirt = 2;       ///< This host cannot run guests (no KVM / no VMX/SVM).
inline constexpr int kExitReboot = 3;         ///< The guest asked for a reboot.
inline constexpr int kExitTripleFault = 4;    ///< Triple fault / KVM_EXIT_SHUTDOWN.
inline constexpr int kExitInternalError = 5;  ///< KVM internal error or VM-entry failure.
inline constexpr int kExitSignalBase = 128;   ///< Stopped by signal N: 128 + N.

/// The exit status for a stop reason (kStopped → caller supplies 128 + signal).
inline int exit_status_for(StopKind k) {
  switch (k) {
    case StopKind::kPowerOff: return kExitPowerOff;
    case StopKind::kReboot: return kExitReboot;
    case StopKind::kTripleFault: return kExitTripleFault;
    case StopKind::kInternalError: return kExitInternalError;
    case StopKind::kHostError: return kExitError;
    case StopKind::kStopped: return kExitSignalBase + 15;
  }
  return kExitError;
}

}  // namespace tern
