// ControlLoop's snapshot commands: PUT /snapshot/create (saved on its own thread while the control
// thread keeps serving), PUT /snapshot/load and `tern restore`, and the first resume of a restored
// VM.
#include <pthread.h>
#include <spdlog/spdlog.h>

#include "vmm/control_loop.h"
#include "vmm/exit_status.h"

namespace tern {

tl::expected<void, StartFailure> ControlLoop::restore(const SnapshotLoadSpec& spec,
                                                      const std::string& console) {
  if (!restore_factory_)
    return tl::unexpected(
        StartFailure{kExitError, Error{"snapshot", "restore is not available here", 0}});
  TERN_CHECK(life_.allows(VmEvent::kRestore));
  // The snapshot defines the VM: its configuration replaces resources_ (GET /machine-config,
  // /vm/config report the restored VM); only the console is this process's choice.
  VmResources restored;
  restored.console = console;
  // In-kernel exit accounting asked for before the load (PUT /tern/kernel-exits) is this
  // process's choice too, not the snapshot's: kept, and started before the vCPUs first run.
  const bool kernel_exits = resources_.kernel_exits;
  auto m = restore_factory_(spec, restored);
  if (!m) return tl::unexpected(m.error());
  machine_ = std::move(*m);
  resources_ = std::move(restored);
  if (kernel_exits) {
    resources_.kernel_exits = true;
    if (auto on = machine_->set_kernel_exits(true); !on)  // as Vm::build() for a booted VM
      spdlog::warn("{} (the VM runs without in-kernel exit accounting)", on.error().message());
  }
  watch_stop();
  events_.publish({{"event", "snapshot-loaded"}, {"snapshot_path", spec.snapshot_path}});
  transition(VmEvent::kRestore);
  if (spec.resume_vm) resume_machine();
  return {};
}

// Order: a restored VM's vCPU threads are first started here (they were never started, so there
// is nothing to unpark); a paused running VM's vCPUs are unparked.
void ControlLoop::resume_machine() {
  if (life_.state() == VmState::kRestored)
    machine_->start();
  else
    machine_->resume();
  transition(VmEvent::kResume);
}

// PUT /snapshot/create: the VM must be paused (as in Firecracker). The save runs on its own
// thread so GET /tern/stats keeps answering with its progress; the reply waits for the result.
void ControlLoop::create_snapshot(const SnapshotCreateSpec& spec,
                                  std::function<void(ApiResponse)> reply) {
  if (life_.state() == VmState::kSaving) {
    reply(ApiResponse::error(400, "snapshot/create: a snapshot is already being saved"));
    return;
  }
  if (!life_.allows(VmEvent::kSaveBegin)) {
    reply(ApiResponse::error(
        400, life_.state() == VmState::kRunning
                 ? std::string("snapshot/create: the VM must be paused first "
                               "(PATCH /vm {\"state\": \"Paused\"}); it is Running")
                 : std::string("snapshot/create: the VM is ") + life_.name() +
                       "; only a paused VM can be saved"));
    return;
  }
  if (saver_.joinable()) saver_.join();
  transition(VmEvent::kSaveBegin);
  progress_.begin(spec.snapshot_path, spec.mem_file_path);
  events_.publish({{"event", "snapshot-start"},
                   {"snapshot_path", spec.snapshot_path},
                   {"mem_file_path", spec.mem_file_path}});
  save_reply_ = std::move(reply);
  Machine* m = machine_.get();
  CommandQueue* q = queue_.get();
  SnapshotProgress* p = &progress_;
  cancel_save_ = false;
  std::atomic<bool>* cancel = &cancel_save_;
  saver_ = std::thread([m, q, p, cancel, spec] {
    pthread_setname_np(pthread_self(), "snapshot-save");
    auto r = m->save_snapshot(
        spec, [p](uint64_t done, uint64_t total) { p->update(done, total); }, *cancel);
    q->push(cmd::SnapshotSaved{std::move(r)});
  });
}

void ControlLoop::handle(cmd::SnapshotSaved& c) {
  if (saver_.joinable()) saver_.join();
  if (life_.state() == VmState::kSaving) transition(VmEvent::kSaveEnd);  // else: power-off came
  ApiResponse resp;
  if (c.result) {
    const SnapshotReport& r = *c.result;
    progress_.succeed(r);
    events_.publish({{"event", "snapshot-done"},
                     {"total_bytes", r.total_bytes},
                     {"written_bytes", r.written_bytes},
                     {"seconds", r.seconds}});
    resp = ApiResponse::no_content();
  } else {
    progress_.fail(c.result.error().message());
    events_.publish({{"event", "snapshot-failed"}, {"error", c.result.error().message()}});
    resp = ApiResponse::error(400, "snapshot/create: " + c.result.error().message());
  }
  if (save_reply_) std::exchange(save_reply_, nullptr)(std::move(resp));
}

// PUT /snapshot/load: only into a tern that has no VM yet.
ApiResponse ControlLoop::load_snapshot(const SnapshotLoadSpec& spec) {
  if (life_.state() != VmState::kNotStarted && life_.state() != VmState::kConfigured)
    return ApiResponse::error(400, std::string("snapshot/load: this tern already has a VM (") +
                                       life_.name() +
                                       "); load a snapshot into a fresh tern --api-sock");
  if (!life_.allows(VmEvent::kRestore))  // kConfigured
    return ApiResponse::error(
        400,
        "snapshot/load: not after pre-boot configuration (boot-source, machine-config, "
        "drives): the snapshot defines the VM; load it into a fresh tern --api-sock");
  auto ok = restore(spec, resources_.console);
  if (!ok) return ApiResponse::error(400, "snapshot/load: " + ok.error().error.message());
  return ApiResponse::no_content();
}

}  // namespace tern
