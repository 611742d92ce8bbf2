// Vm: a Linux guest built from a VmConfig — KVM VM, guest RAM, legacy devices, vCPU threads — and
// run until it stops.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "base/result.h"
#include "bus/bus.h"
#include "kvm/kvm_system.h"
#include "memory/guest_memory.h"
#include "stats/queue_counters.h"
#include "stats/vm_stats.h"
#include "vcpu/stop_event.h"
#include "vcpu/vcpu_thread.h"
#include "vmm/boot_inputs.h"

namespace tern {

class LegacyDevices;
class PciDevices;

class Vm {
 public:
  /// Builds the whole VM from validated inputs (see prepare_boot()): KVM VM, RAM, kernel, firmware
  /// tables, devices, vCPUs. Errors here are host/KVM failures. No vCPU runs until run().
  static Result<std::unique_ptr<Vm>> create(const BootInputs& inputs);
  ~Vm();

  /// Starts the vCPUs and console and blocks until the guest stops (or stop() is called).
  /// Returns why it stopped. Call once.
  StopEvent run();

  /// Asks a running VM to stop with `e` (thread-safe; e.g. from a signal watcher).
  void stop(StopEvent e);

  // The pieces of run(), for the control loop (src/vmm/control_loop.h), which owns the VM and calls
  // them from its own thread: start(), then wait_stopped() (on any thread), then finish().
  /// Starts the console and the vCPUs; returns at once. Call once.
  void start();
  /// Blocks until the guest stops or stop() is called; returns the first stop reason.
  StopEvent wait_stopped();
  /// Stops and joins the vCPU threads and flushes the console. Idempotent.
  void finish();
  /// Parks every vCPU outside KVM_RUN (pending PIO/MMIO completed); returns when all are parked.
  void pause();
  /// Lets paused vCPUs run again.
  void resume();
  /// Types Ctrl+Alt+Del on the i8042 keyboard. False if the guest's keyboard cannot take it.
  bool send_ctrl_alt_del();

  [[nodiscard]] const Bus& pio_bus() const { return pio_; }
  [[nodiscard]] const std::vector<std::unique_ptr<VcpuThread>>& vcpus() const { return vcpus_; }
  /// Exit accounting, device attribution, KVM and thread statistics (GET /tern/stats, /metrics,
  /// --stats-on-exit). Valid for the Vm's lifetime, any thread.
  [[nodiscard]] const StatsSource& stats() const { return *stats_; }
  /// Where devices register per-queue counters (ioeventfd kicks, irqfd injections).
  [[nodiscard]] QueueCounterRegistry& queue_counters() { return queues_; }

 private:
  Vm() = default;
  Result<void> build(const BootInputs& in);

  std::optional<KvmSystem> kvm_;
  std::optional<KvmVm> vm_;
  std::optional<GuestMemory> memory_;
  Bus pio_{"pio"};
  Bus mmio_{"mmio"};
  StopLatch stop_;
  std::unique_ptr<LegacyDevices> devices_;
  std::unique_ptr<PciDevices> pci_;  // after memory_/vm_: its devices use both until destroyed
  std::vector<std::unique_ptr<VcpuThread>> vcpus_;
  QueueCounterRegistry queues_;
  std::unique_ptr<VmStats> stats_;  // last: refers to the buses, queues_ and vCPUs above
};

}  // namespace tern
