// ControlLoop: the one thread that owns the VM. API requests, host signals and the guest stopping
// all arrive as commands on its queue; it validates them against the lifecycle table
// (vm_state.h) and executes them in order. It owns the one configuration (VmResources).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <tl/expected.hpp>
#include <vector>

#include "api/api_request.h"
#include "api/event_log.h"
#include "vmm/command_queue.h"
#include "vmm/machine.h"
#include "vmm/snapshot_progress.h"
#include "vmm/vm_config.h"
#include "vmm/vm_machine.h"
#include "vmm/vm_resources.h"
#include "vmm/vm_state.h"

namespace tern {

/// Builds a Machine from a configuration (create_vm_machine() for real; a fake in tests).
using MachineFactory =
    std::function<tl::expected<std::unique_ptr<Machine>, StartFailure>(const VmConfig&)>;

/// Builds a Machine from a snapshot (create_restored_machine() for real; a fake in tests): checks
/// the state and memory files, the devices and the host, and applies the state; no vCPU runs. The
/// console is resources.console; on success `resources` becomes the snapshot's configuration.
using RestoreFactory = std::function<tl::expected<std::unique_ptr<Machine>, StartFailure>(
    const SnapshotLoadSpec&, VmResources& resources)>;

/// `e` with its op, when prepare_boot() named a command-line option (--kernel, --memory,
/// --boot-protocol, a device option...), renamed to the API/config-file field that sets the same
/// thing (boot-source.kernel_image_path, machine-config.mem_size_mib, ...).
[[nodiscard]] Error with_api_field_names(Error e);

/// Owns the VM and its configuration. Construct, optionally configure() and start() (the CLI and
/// --config-file paths), then run() on the thread that will be the control thread; other threads
/// only push() commands onto queue().
class ControlLoop {
 public:
  /// `restore` may be empty (PUT /snapshot/load then answers 400).
  static Result<std::unique_ptr<ControlLoop>> create(MachineFactory factory, EventLog& events,
                                                     RestoreFactory restore = {});
  ~ControlLoop();

  [[nodiscard]] CommandQueue& queue() { return *queue_; }

  /// Pre-start configuration from the command line or a config file (before run()).
  void configure(VmResources resources);
  /// Before run(): the VM that start() or restore() builds gets in-kernel exit accounting, as
  /// after a PUT /tern/kernel-exits {"enabled": true} before boot or load (`tern restore
  /// --kernel-exits`; a snapshot does not carry the setting).
  void request_kernel_exits() { resources_.kernel_exits = true; }
  /// Builds and starts the VM now (before run()); errors keep their `tern run` exit status.
  tl::expected<void, StartFailure> start();
  /// Builds the VM from a snapshot now (before run(); `tern restore`): the VM is left Paused, or
  /// Running when spec.resume_vm. The guest console goes to `console` (stdio or file:PATH).
  tl::expected<void, StartFailure> restore(const SnapshotLoadSpec& spec,
                                           const std::string& console);

  /// Executes commands until the VM has stopped, or until a stop signal arrives while no VM runs.
  /// Returns tern's exit status (README: 0 power-off, 3 reboot, ..., 128+N signal N) and prints
  /// the one-line reason on stderr for every non-zero status.
  int run();

  /// The VM's statistics while a VM exists (also after it stopped), else null. Control thread.
  [[nodiscard]] const StatsSource* stats() const { return machine_ ? &machine_->stats() : nullptr; }
  /// Guest resets done in place (--on-reboot restart) since the VM was built (control thread).
  [[nodiscard]] uint64_t resets() const { return resets_; }
  /// Progress of the current or last snapshot save (any thread).
  [[nodiscard]] const SnapshotProgress& snapshot_progress() const { return progress_; }

  /// The current state (control thread only; tests read it after run() returned).
  [[nodiscard]] VmState state() const { return life_.state(); }
  /// The configuration (control thread only; tests read it after run() returned).
  [[nodiscard]] const VmResources& resources() const { return resources_; }

 private:
  ControlLoop(MachineFactory factory, EventLog& events, RestoreFactory restore)
      : factory_(std::move(factory)), restore_factory_(std::move(restore)), events_(events) {}
  void handle(cmd::Api& c);
  void handle(cmd::Signal& c);
  void handle(cmd::GuestStopped& c);
  /// A guest reset request `e` with --on-reboot restart: resets the machine and starts it again
  /// ("reset" event, resets_ counted). False when the reset failed (`status` then set: 1).
  bool restart_guest(const StopEvent& e, int& status);
  void handle(cmd::SnapshotSaved& c);
  void handle(cmd::DeviceWork& c);
  void create_snapshot(const SnapshotCreateSpec& spec, std::function<void(ApiResponse)> reply);
  ApiResponse load_snapshot(const SnapshotLoadSpec& spec);
  void watch_stop();
  void resume_machine();
  ApiResponse execute(const ApiRequest& r);
  ApiResponse instance_start();
  ApiResponse state_error(const std::string& what) const;
  ApiResponse configure_request(const char* what, const std::function<Result<void>()>& write);
  void transition(VmEvent e);
  nlohmann::json instance_info() const;

  MachineFactory factory_;
  RestoreFactory restore_factory_;
  EventLog& events_;
  std::unique_ptr<CommandQueue> queue_;
  VmLifecycle life_;
  VmResources resources_;  // the one configuration: every write and every GET goes through it

  std::unique_ptr<Machine> machine_;
  std::thread stop_waiter_;
  // Snapshot save: runs on saver_ while the control thread keeps serving (stats, progress).
  SnapshotProgress progress_;
  std::thread saver_;
  std::atomic<bool> cancel_save_{false};  // power-off and stop signals cancel a save in progress
  std::function<void(ApiResponse)> save_reply_;
  // The loop itself, not the VM: when run() returns, with which status, after which signal.
  uint64_t resets_ = 0;  // guest resets restarted in place (GET /tern/stats "lifecycle")
  std::string last_reset_reason_;
  bool done_ = false;
  int exit_status_ = 0;
  int signo_ = 0;
};

}  // namespace tern
