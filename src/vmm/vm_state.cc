#include "vmm/vm_state.h"

#include <string_view>

#include "base/result.h"

namespace tern {

namespace {

using S = VmState;
using E = VmEvent;

struct Transition {
  S from;
  E event;
  S to;
};

// Every legal transition; anything else is refused. kSaveEnd returns to where the save began
// (kPaused or kRestored: VmLifecycle::from_), and kStopping keeps showing its origin.
constexpr Transition kTable[] = {
    {S::kNotStarted, E::kConfigure, S::kConfigured},
    {S::kConfigured, E::kConfigure, S::kConfigured},
    {S::kNotStarted, E::kStart, S::kRunning},
    {S::kConfigured, E::kStart, S::kRunning},
    {S::kNotStarted, E::kRestore, S::kRestored},  // not after pre-boot configuration
    {S::kRunning, E::kPause, S::kPaused},
    {S::kPaused, E::kResume, S::kRunning},
    {S::kRestored, E::kResume, S::kRunning},
    {S::kRunning, E::kCtrlAltDel, S::kRunning},
    {S::kPaused, E::kSaveBegin, S::kSaving},
    {S::kRestored, E::kSaveBegin, S::kSaving},
    {S::kSaving, E::kSaveEnd, S::kPaused},  // or kRestored: from_
    {S::kRunning, E::kPowerOff, S::kStopping},
    {S::kPaused, E::kPowerOff, S::kStopping},
    {S::kRestored, E::kPowerOff, S::kStopping},
    {S::kSaving, E::kPowerOff, S::kStopping},  // cancels the save
    {S::kRunning, E::kGuestStopped, S::kStopped},
    {S::kPaused, E::kGuestStopped, S::kStopped},
    {S::kRestored, E::kGuestStopped, S::kStopped},
    {S::kSaving, E::kGuestStopped, S::kStopped},
    {S::kStopping, E::kGuestStopped, S::kStopped},
};

}  // namespace

const char* vm_state_name(VmState s) {
  switch (s) {
    case S::kNotStarted:
    case S::kConfigured:
      return "Not started";
    case S::kRunning:
      return "Running";
    case S::kPaused:
    case S::kRestored:
    case S::kSaving:
      return "Paused";
    case S::kStopping:
      return "Running";
    case S::kStopped:
      return "Stopped";
  }
  return "?";
}

std::optional<VmState> VmLifecycle::next(VmEvent e) const {
  for (const Transition& t : kTable) {
    if (t.from != state_ || t.event != e) continue;
    if (t.event == E::kSaveEnd) return from_;
    return t.to;
  }
  return std::nullopt;
}

bool VmLifecycle::apply(VmEvent e) {
  auto to = next(e);
  TERN_CHECK(to.has_value());
  const char* before = name();
  if (*to == S::kSaving || *to == S::kStopping) {
    // A power-off during a save shows (and cancels) the save's origin: Paused.
    if (state_ != S::kSaving) from_ = state_;
  }
  state_ = *to;
  return std::string_view(before) != name();
}

const char* VmLifecycle::name() const {
  if (state_ == S::kSaving || state_ == S::kStopping) return vm_state_name(from_);
  return vm_state_name(state_);
}

bool VmLifecycle::has_vm() const {
  return state_ != S::kNotStarted && state_ != S::kConfigured && state_ != S::kStopped;
}

}  // namespace tern
