// StopEvent and StopLatch: why a VM stopped, and the one place the first reason is recorded.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

namespace tern {

/// Why the VM stopped. Each maps to a documented `tern run` exit status (see src/vmm/exit_status.h).
enum class StopKind {
  kPowerOff,       ///< The guest powered off (ACPI S5 or KVM_SYSTEM_EVENT_SHUTDOWN).
  kReboot,         ///< The guest asked for a reset (i8042 0xFE, ACPI reset register, SYSTEM_EVENT_RESET).
  kTripleFault,    ///< KVM_EXIT_SHUTDOWN: triple fault or similar unrecoverable guest state.
  kInternalError,  ///< KVM_EXIT_INTERNAL_ERROR / FAIL_ENTRY / unknown exit: KVM could not continue.
  kHostError,      ///< tern itself failed (an ioctl error while running).
  kStopped,        ///< Stopped from the host (signal, API power-off).
};

/// Human name of a StopKind ("power-off", "reboot", ...).
const char* stop_kind_name(StopKind k);

/// One stop reason with where it happened.
struct StopEvent {
  StopKind kind = StopKind::kStopped;
  int vcpu = -1;       ///< vCPU index, or -1 when not from a vCPU.
  uint64_t rip = 0;    ///< Guest RIP at the exit, when known.
  std::string detail;  ///< One-line reason: exit reason name, suberror, device...
};

/// Records the first StopEvent posted (later ones are ignored) and wakes waiters.
/// Thread-safe; post() never blocks for long, so vCPU and device threads may call it.
class StopLatch {
 public:
  /// Records `e` if it is the first event. Returns true if it was.
  bool post(StopEvent e) {
    std::lock_guard lock(mu_);
    if (event_) return false;
    event_ = std::move(e);
    posted_.store(true, std::memory_order_release);
    cv_.notify_all();
    return true;
  }
  /// Blocks until an event is posted and returns it.
  StopEvent wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return event_.has_value(); });
    return *event_;
  }
  /// Whether an event was posted. Lock-free: vCPU threads ask after every PIO/MMIO exit.
  [[nodiscard]] bool posted() const { return posted_.load(std::memory_order_acquire); }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::optional<StopEvent> event_;
  std::atomic<bool> posted_{false};
};

}  // namespace tern
