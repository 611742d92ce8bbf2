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
#include "vcpu/stop_event.h"
#include "vcpu/vcpu_thread.h"
#include "vmm/boot_inputs.h"

namespace tern {

class LegacyDevices;

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

  [[nodiscard]] const Bus& pio_bus() const { return pio_; }
  [[nodiscard]] const std::vector<std::unique_ptr<VcpuThread>>& vcpus() const { return vcpus_; }

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
  std::vector<std::unique_ptr<VcpuThread>> vcpus_;
};

}  // namespace tern
