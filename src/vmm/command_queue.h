// CommandQueue: everything that wants to change the VM — API requests, host signals, the guest
// stopping — arrives here as a Command for the one control thread (src/vmm/control_loop.h).
#pragma once

#include <deque>
#include <functional>
#include <mutex>
#include <variant>

#include "api/api_request.h"
#include "base/fd.h"
#include "base/result.h"
#include "vcpu/stop_event.h"
#include "vmm/machine.h"

namespace tern {

namespace cmd {
/// A validated API request and where its answer goes (called once, on the control thread).
struct Api {
  ApiRequest request;
  std::function<void(ApiResponse)> reply;
};
/// SIGINT/SIGTERM/SIGHUP reached tern.
struct Signal {
  int signo = 0;
};
/// The VM stopped (guest power-off/reset, triple fault, KVM error, or a requested stop).
struct GuestStopped {
  StopEvent event;
};
/// A snapshot save running on its own thread finished (successfully or not).
struct SnapshotSaved {
  Result<SnapshotReport> result;
};
/// A device queued activation/reset work (DeviceActivator): run it, a vCPU is waiting.
struct DeviceWork {};
}  // namespace cmd

using Command = std::variant<cmd::Api, cmd::Signal, cmd::GuestStopped, cmd::SnapshotSaved,
                             cmd::DeviceWork>;

/// Multi-producer, single-consumer queue whose eventfd becomes readable when commands are waiting
/// (the control loop polls it). push() never blocks for long: any thread may call it.
class CommandQueue {
 public:
  static Result<std::unique_ptr<CommandQueue>> create();

  void push(Command c);
  /// Takes every waiting command (and resets the eventfd).
  std::deque<Command> drain();
  /// Readable while commands are waiting.
  [[nodiscard]] BorrowedFd fd() const { return efd_.borrow(); }

 private:
  CommandQueue() = default;
  UniqueFd efd_;
  std::mutex mu_;
  std::deque<Command> items_;
};

}  // namespace tern
