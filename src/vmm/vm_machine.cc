#include "vmm/vm_machine.h"

#include "base/log.h"
#include "vmm/exit_status.h"
#include "vmm/host_check.h"
#include "vmm/vm.h"

namespace tern {

namespace {

class VmMachine : public Machine {
 public:
  /// `inputs`: what the VM was built from, kept for a reset when it restarts on reboot (else
  /// null: its kernel bytes are freed now).
  VmMachine(std::unique_ptr<Vm> vm, OnReboot on_reboot, std::unique_ptr<BootInputs> inputs)
      : vm_(std::move(vm)), on_reboot_(on_reboot), inputs_(std::move(inputs)) {}
  ~VmMachine() override {
    if (vm_) vm_->finish();
  }
  [[nodiscard]] OnReboot on_reboot() const override { return on_reboot_; }
  // vm.h "Reset rule": the guest side is dropped whole and built again from the same inputs.
  // Order: finish() (vCPUs joined) → prepare_reset() (devices quiesced, disks flushed) → the old
  // Vm destroyed (virtio devices reset, NVMe controllers and their workers gone, the KVM VM and
  // its RAM closed) → a new Vm from inputs_ with the kept console. The old KVM VM is closed before
  // the new one is made: two guests' RAM never coexist.
  Result<void> reset() override {
    if (!inputs_) return Machine::reset();
    vm_->finish();
    // A failed flush keeps this Vm (stopped, its statistics readable): the caller ends it.
    if (auto flushed = vm_->prepare_reset(); !flushed)
      return fail("reset: flushing the disks", flushed.error().message());
    KeptHost kept = vm_->release_host();
    vm_.reset();
    auto vm = Vm::create(*inputs_, std::move(kept));
    if (!vm) return fail("reset: rebuilding the VM", vm.error().message());
    vm_ = std::move(*vm);
    return {};
  }
  void start() override { vm_->start(); }
  StopEvent wait_stopped() override { return vm_->wait_stopped(); }
  void stop(StopEvent e) override { vm_->stop(std::move(e)); }
  void finish() override { vm_->finish(); }
  void pause() override { vm_->pause(); }
  void resume() override { vm_->resume(); }
  bool send_ctrl_alt_del() override { return vm_->send_ctrl_alt_del(); }
  Result<SnapshotReport> save_snapshot(const SnapshotCreateSpec& spec, const SaveProgress& progress,
                                       const std::atomic<bool>& cancel) override {
    return vm_->save_snapshot(spec, progress, cancel);
  }
  [[nodiscard]] const StatsSource& stats() const override { return vm_->stats(); }
  [[nodiscard]] Result<void> set_kernel_exits(bool enabled) override {
    return vm_->set_kernel_exits(enabled);
  }
  [[nodiscard]] DeviceActivator* activator() override { return &vm_->activator(); }

 private:
  std::unique_ptr<Vm> vm_;  // null only after a failed reset()
  OnReboot on_reboot_;
  std::unique_ptr<BootInputs> inputs_;
};

}  // namespace

namespace {

tl::expected<std::unique_ptr<Machine>, StartFailure> build_restored_machine(
    const SnapshotLoadSpec& spec, VmResources& resources, bool check_host) {
  // User input first (the files), then the host.
  spdlog::debug("restore: reading {}", spec.snapshot_path);
  auto inputs = prepare_restore(spec, resources.console);
  if (!inputs) return tl::unexpected(StartFailure{kExitError, inputs.error()});
  if (std::string why = check_host ? kvm_unusable_reason() : ""; !why.empty())
    return tl::unexpected(StartFailure{kExitNoHwVirt, Error{std::move(why), "", 0}});
  auto vm = Vm::restore(*inputs);
  if (!vm) return tl::unexpected(StartFailure{kExitError, vm.error()});
  resources = VmResources::from_machine_state(inputs->machine, resources.console);
  resources.memory_backend = spec.memory_backend;  // as given (GET /vm/config)
  resources.cpu_affinity = spec.cpu_affinity;
  if (inputs->memory_backend == MemoryBackend::kHugetlbfs) resources.huge_pages = "2M";
  // A guest reset rebuilds the VM from BootInputs (vm.h "Reset rule"). A firmware-booted
  // snapshot has them (the firmware file read again, the store, the restored devices and
  // console): a restored firmware VM restarts in place, through its firmware. A direct kernel
  // boot's kernel is not loaded again: it exits (prepare_restore refused restart for it).
  std::unique_ptr<BootInputs> kept;
  if (inputs->on_reboot == OnReboot::kRestart) {
    TERN_CHECK(inputs->firmware_boot);
    kept = std::move(inputs->firmware_boot);
    kept->devices = std::move(inputs->devices);
  }
  return std::make_unique<VmMachine>(std::move(*vm), inputs->on_reboot, std::move(kept));
}

}  // namespace

tl::expected<std::unique_ptr<Machine>, StartFailure> create_restored_machine(
    const SnapshotLoadSpec& spec, VmResources& resources) {
  return build_restored_machine(spec, resources, /*check_host=*/true);
}

tl::expected<std::unique_ptr<Machine>, StartFailure> create_restored_machine_on_any_kvm(
    const SnapshotLoadSpec& spec, VmResources& resources) {
  return build_restored_machine(spec, resources, /*check_host=*/false);
}

namespace {

tl::expected<std::unique_ptr<Machine>, StartFailure> build_vm_machine(const VmConfig& config,
                                                                      bool check_host) {
  // User input first: a typo gets its own message whatever the host.
  auto inputs = prepare_boot(config);
  if (!inputs) return tl::unexpected(StartFailure{kExitError, inputs.error()});
  if (std::string why = check_host ? kvm_unusable_reason() : ""; !why.empty())
    return tl::unexpected(StartFailure{kExitNoHwVirt, Error{std::move(why), "", 0}});
  auto vm = Vm::create(*inputs);
  if (!vm) return tl::unexpected(StartFailure{kExitError, vm.error()});
  OnReboot on_reboot = config.on_reboot.value_or(inputs->default_on_reboot);
  std::unique_ptr<BootInputs> kept;
  if (on_reboot == OnReboot::kRestart) kept = std::make_unique<BootInputs>(std::move(*inputs));
  return std::make_unique<VmMachine>(std::move(*vm), on_reboot, std::move(kept));
}

}  // namespace

tl::expected<std::unique_ptr<Machine>, StartFailure> create_vm_machine(const VmConfig& config) {
  return build_vm_machine(config, /*check_host=*/true);
}

tl::expected<std::unique_ptr<Machine>, StartFailure> create_vm_machine_on_any_kvm(
    const VmConfig& config) {
  return build_vm_machine(config, /*check_host=*/false);
}

}  // namespace tern
