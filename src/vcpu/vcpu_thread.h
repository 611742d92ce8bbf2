// VcpuThread: runs one vCPU's KVM_RUN loop on its own thread and handles its exits inline.
#pragma once

#include <pthread.h>

#include <atomic>
#include <thread>

#include "bus/bus.h"
#include "kvm/kvm_vcpu.h"
#include "vcpu/exit_stats.h"
#include "vcpu/stop_event.h"

namespace tern {

/// States of the vCPU thread (a later pause feature adds pausing/paused).
enum class VcpuState { kCreated, kRunning, kExited };

/// Owns a KvmVcpu and the thread that runs it.
///
/// PIO exits go to `pio`, MMIO exits to `mmio`; guest power-off/reset/triple-fault and KVM errors
/// are posted to `stop` (the first post wins) and end this vCPU's loop. stop() kicks the thread out
/// of KVM_RUN: it sets kvm_run.immediate_exit and sends kKickSignal, so a kick that lands just
/// before KVM_RUN is entered is not lost.
class VcpuThread {
 public:
  VcpuThread(KvmVcpu vcpu, Bus& pio, Bus& mmio, StopLatch& stop);
  ~VcpuThread();
  VcpuThread(const VcpuThread&) = delete;
  VcpuThread& operator=(const VcpuThread&) = delete;

  /// Installs the (empty, non-SA_RESTART) handler for kKickSignal. Call once per process before
  /// starting vCPU threads.
  static void install_kick_handler();

  void start();
  /// Asks the loop to end and kicks the thread out of KVM_RUN. Idempotent, any thread.
  void stop();
  void join();

  [[nodiscard]] const ExitStats& stats() const { return stats_; }
  [[nodiscard]] KvmVcpu& vcpu() { return vcpu_; }
  [[nodiscard]] VcpuState state() const { return state_.load(); }

 private:
  void loop();
  /// Handles the exit in kvm_run; returns false when the loop must end.
  bool handle_exit();
  void post_stop(StopKind kind, std::string detail);

  KvmVcpu vcpu_;
  Bus& pio_;
  Bus& mmio_;
  StopLatch& stop_latch_;
  ExitStats stats_;
  std::atomic<bool> stop_requested_{false};
  std::atomic<VcpuState> state_{VcpuState::kCreated};
  std::atomic<bool> thread_started_{false};
  pthread_t handle_{};
  std::thread thread_;
};

}  // namespace tern
