#include "vcpu/stop_event.h"

namespace tern {

const char* stop_kind_name(StopKind k) {
  switch (k) {
    case StopKind::kPowerOff: return "power-off";
    case StopKind::kReboot: return "reboot";
    case StopKind::kTripleFault: return "triple-fault";
    case StopKind::kInternalError: return "kvm-internal-error";
    case StopKind::kHostError: return "host-error";
    case StopKind::kStopped: return "stopped";
  }
  return "unknown";
}

}  // namespace tern
