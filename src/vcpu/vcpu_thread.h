// VcpuThread: runs one vCPU's KVM_RUN loop on its own thread and handles its exits inline.
#pragma once

#include <pthread.h>

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "bus/bus.h"
#include "kvm/kvm_vcpu.h"
#include "vcpu/exit_stats.h"
#include "vcpu/stop_event.h"

namespace tern {

/// States of the vCPU thread: created → running ⇄ (pausing → paused) → exited.
enum class VcpuThreadState { kCreated, kRunning, kPausing, kPaused, kExited };

/// Owns a KvmVcpu and the thread that runs it.
///
/// PIO exits go to `pio`, MMIO exits to `mmio`; guest power-off/reset/triple-fault and KVM errors
/// are posted to `stop` (the first post wins) and end this vCPU's loop. stop() kicks the thread out
/// of KVM_RUN: it sets kvm_run.immediate_exit and sends kKickSignal, so a kick that lands just
/// before KVM_RUN is entered is not lost.
///
/// Pause: request_pause() kicks the thread the same way; the thread parks on a condition variable
/// (no spinning, no KVM_RUN) only after a KVM_RUN returned -EINTR, i.e. after KVM completed any
/// PIO/MMIO exit that userspace had handled (see the ordering rule in vcpu_thread.cc). resume()
/// wakes it. pause/resume are called by the control thread only; stop() may come from anywhere
/// and also ends a pause.
class VcpuThread {
 public:
  VcpuThread(KvmVcpu vcpu, Bus& pio, Bus& mmio, StopLatch& stop);
  ~VcpuThread();
  VcpuThread(const VcpuThread&) = delete;
  VcpuThread& operator=(const VcpuThread&) = delete;

  /// Installs the (empty, non-SA_RESTART) handler for kKickSignal. Call once per process before
  /// starting vCPU threads.
  static void install_kick_handler();

  /// A StopEvent of `kind` naming the calling vCPU and its RIP when called on a vCPU thread
  /// (e.g. from a device callback during a PIO exit), or vCPU -1 elsewhere.
  static StopEvent stop_event_here(StopKind kind, std::string detail);

  void start();
  /// Asks the loop to end and kicks the thread out of KVM_RUN. Idempotent, any thread.
  void stop();
  void join();

  /// Asks the thread to park and kicks it out of KVM_RUN; returns at once. No-op unless running.
  void request_pause();
  /// Blocks until the thread is parked (kPaused) or has exited (kExited), or it never started.
  void wait_paused();
  /// Lets a paused (or pausing) thread re-enter KVM_RUN. A parked vCPU's guest is first told it
  /// was stopped (KvmVcpu::kvmclock_ctrl()).
  void resume();
  /// Kernel thread id of the vCPU thread (0 before it started).
  [[nodiscard]] pid_t tid() const { return tid_.load(); }

  [[nodiscard]] const ExitStats& stats() const { return stats_; }
  [[nodiscard]] KvmVcpu& vcpu() { return vcpu_; }
  [[nodiscard]] VcpuThreadState state() const { return state_.load(); }

 private:
  void loop();
  /// Handles the exit in kvm_run; returns false when the loop must end.
  bool handle_exit();
  void post_stop(StopKind kind, std::string detail);
  /// Called after KVM_RUN returned -EINTR/-EAGAIN: parks while a pause is requested and re-arms
  /// immediate_exit. Returns false when the loop must end.
  bool after_kick();

  KvmVcpu vcpu_;
  Bus& pio_;
  Bus& mmio_;
  StopLatch& stop_latch_;
  ExitStats stats_;
  std::atomic<bool> stop_requested_{false};
  std::atomic<VcpuThreadState> state_{VcpuThreadState::kCreated};
  std::atomic<bool> thread_started_{false};
  std::atomic<pid_t> tid_{0};
  // Pause handshake: pause_requested_ and kvm_run.immediate_exit are written under pause_mu_.
  std::mutex pause_mu_;
  std::condition_variable pause_cv_;
  bool pause_requested_ = false;
  pthread_t handle_{};
  std::thread thread_;
};

}  // namespace tern
