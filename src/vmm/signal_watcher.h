// SignalWatcher: turns SIGINT/SIGTERM/SIGHUP into a clean VM stop instead of killing tern.
#pragma once

#include <functional>
#include <thread>

#include "base/fd.h"
#include "base/result.h"

namespace tern {

/// Blocks SIGINT, SIGTERM and SIGHUP in the calling thread (call it from main before any other
/// thread starts, so every thread inherits the mask) and watches them on a thread of its own
/// through a signalfd. The first signal calls `on_signal(signo)`. Destruction stops the thread.
class SignalWatcher {
 public:
  static Result<std::unique_ptr<SignalWatcher>> start(std::function<void(int)> on_signal);
  ~SignalWatcher();
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

 private:
  SignalWatcher() = default;
  UniqueFd sigfd_;
  UniqueFd wake_;
  std::thread thread_;
};

}  // namespace tern
