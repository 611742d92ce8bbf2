#include "vmm/vm_machine.h"

#include "base/log.h"
#include "vmm/exit_status.h"
#include "vmm/host_check.h"
#include "vmm/vm.h"

namespace tern {

namespace {

class VmMachine : public Machine {
 public:
  explicit VmMachine(std::unique_ptr<Vm> vm) : vm_(std::move(vm)) {}
  ~VmMachine() override { vm_->finish(); }
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
  std::unique_ptr<Vm> vm_;
};

}  // namespace

tl::expected<std::unique_ptr<Machine>, StartFailure> create_restored_machine(
    const SnapshotLoadSpec& spec, VmResources& resources) {
  // User input first (the files), then the host.
  spdlog::debug("restore: reading {}", spec.snapshot_path);
  auto inputs = prepare_restore(spec, resources.console);
  if (!inputs) return tl::unexpected(StartFailure{kExitError, inputs.error()});
  if (std::string why = kvm_unusable_reason(); !why.empty())
    return tl::unexpected(StartFailure{kExitNoHwVirt, Error{std::move(why), "", 0}});
  auto vm = Vm::restore(*inputs);
  if (!vm) return tl::unexpected(StartFailure{kExitError, vm.error()});
  resources = VmResources::from_machine_state(inputs->machine, resources.console);
  resources.memory_backend = spec.memory_backend;  // as given (GET /vm/config)
  return std::make_unique<VmMachine>(std::move(*vm));
}

tl::expected<std::unique_ptr<Machine>, StartFailure> create_vm_machine(
    const VmConfig& config) {
  // User input first: a typo gets its own message whatever the host.
  auto inputs = prepare_boot(config);
  if (!inputs) return tl::unexpected(StartFailure{kExitError, inputs.error()});
  if (std::string why = kvm_unusable_reason(); !why.empty())
    return tl::unexpected(StartFailure{kExitNoHwVirt, Error{std::move(why), "", 0}});
  auto vm = Vm::create(*inputs);
  if (!vm) return tl::unexpected(StartFailure{kExitError, vm.error()});
  return std::make_unique<VmMachine>(std::move(*vm));
}

}  // namespace tern
