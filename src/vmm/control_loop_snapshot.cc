// ControlLoop's snapshot commands: PUT /snapshot/create (saved on its own thread while the control
// thread keeps serving), PUT /snapshot/load and `tern restore`, and the first resume of a restored
// VM.
#include <pthread.h>

#include "vmm/control_loop.h"
#include "vmm/exit_status.h"

namespace tern {

tl::expected<void, StartFailure> ControlLoop::restore(const SnapshotLoadSpec& spec,
                                                      const std::string& console) {
  if (!restore_factory_)
    return tl::unexpected(
        StartFailure{kExitError, Error{"snapshot", "restore is not available here", 0}});
  auto m = restore_factory_(spec, console);
  if (!m) return tl::unexpected(m.error());
  machine_ = std::move(*m);
  watch_stop();
  events_.publish({{"event", "snapshot-loaded"}, {"snapshot_path", spec.snapshot_path}});
  set_state(VmState::kPaused);
  if (spec.resume_vm) resume_machine();
  return {};
}

// Order: a restored VM's vCPU threads are first started here (they were never started, so there
// is nothing to unpark); a paused running VM's vCPUs are unparked.
void ControlLoop::resume_machine() {
  if (!machine_started_) {
    machine_->start();
    machine_started_ = true;
  } else {
    machine_->resume();
  }
  set_state(VmState::kRunning);
}

// PUT /snapshot/create: the VM must be paused (as in Firecracker). The save runs on its own
// thread so GET /tern/stats keeps answering with its progress; the reply waits for the result.
void ControlLoop::create_snapshot(const SnapshotCreateSpec& spec,
                                  std::function<void(ApiResponse)> reply) {
  if (progress_.saving()) {
    reply(ApiResponse::error(400, "snapshot/create: a snapshot is already being saved"));
    return;
  }
  if (state_ != VmState::kPaused) {
    reply(ApiResponse::error(
        400, state_ == VmState::kRunning
                 ? std::string("snapshot/create: the VM must be paused first "
                               "(PATCH /vm {\"state\": \"Paused\"}); it is Running")
                 : std::string("snapshot/create: the VM is ") + vm_state_name(state_) +
                       "; only a paused VM can be saved"));
    return;
  }
  if (saver_.joinable()) saver_.join();
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
  if (state_ != VmState::kNotStarted || machine_)
    return ApiResponse::error(400, std::string("snapshot/load: this tern already has a VM (") +
                                       vm_state_name(state_) +
                                       "); load a snapshot into a fresh tern --api-sock");
  if (configured_)
    return ApiResponse::error(
        400,
        "snapshot/load: not after pre-boot configuration (boot-source, machine-config, "
        "drives): the snapshot defines the VM; load it into a fresh tern --api-sock");
  auto ok = restore(spec, config_.console);
  if (!ok) return ApiResponse::error(400, "snapshot/load: " + ok.error().error.message());
  return ApiResponse::no_content();
}

}  // namespace tern
