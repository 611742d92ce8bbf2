#include "vmm/control_loop.h"

#include <poll.h>

#include <cstdio>
#include <cstring>

#include "api/api_parser.h"
#include "base/log.h"
#include "devices/device_activator.h"
#include "vmm/devices/device_surfaces.h"
#include "vmm/exit_status.h"

namespace tern {

namespace {

template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;  // clang-14 has no aggregate deduction (P1816) yet

}  // namespace

Error with_api_field_names(Error e) {
  static const std::pair<const char*, const char*> names[] = {
      {"--kernel", "boot-source.kernel_image_path"}, {"--initrd", "boot-source.initrd_path"},
      {"--cmdline", "boot-source.boot_args"},        {"--memory", "machine-config.mem_size_mib"},
      {"--cpus", "machine-config.vcpu_count"},      {"--boot-protocol", "boot-source.boot_protocol"},
      {"--on-reboot", "boot-source.on_reboot"}};
  for (auto [cli, api] : names)
    if (e.op == cli) e.op = api;
  for (const DeviceSurface& s : device_surfaces())
    if (e.op == s.cli_option) e.op = std::string(s.config_key);
  return e;
}

Result<std::unique_ptr<ControlLoop>> ControlLoop::create(MachineFactory factory, EventLog& events,
                                                         RestoreFactory restore) {
  auto loop = std::unique_ptr<ControlLoop>(
      new ControlLoop(std::move(factory), events, std::move(restore)));
  ASSIGN_OR_RETURN(loop->queue_, CommandQueue::create());
  events.publish({{"event", "state"}, {"state", loop->life_.name()}});
  return loop;
}

ControlLoop::~ControlLoop() {
  if (saver_.joinable()) saver_.join();
  if (machine_) {
    machine_->stop(StopEvent{StopKind::kStopped, -1, 0, "tern is exiting"});
    if (stop_waiter_.joinable()) stop_waiter_.join();
    machine_->finish();
  }
}

void ControlLoop::configure(VmResources resources) {
  resources_ = std::move(resources);
  transition(VmEvent::kConfigure);
}

// Every state change goes through the lifecycle table; a "state" event is published when the
// state's shown name changes.
void ControlLoop::transition(VmEvent e) {
  if (life_.apply(e)) events_.publish({{"event", "state"}, {"state", life_.name()}});
}

tl::expected<void, StartFailure> ControlLoop::start() {
  TERN_CHECK(life_.allows(VmEvent::kStart));
  auto config = resources_.vm_config();
  if (!config) return tl::unexpected(StartFailure{kExitError, config.error()});
  auto m = factory_(*config);
  if (!m) return tl::unexpected(m.error());
  machine_ = std::move(*m);
  machine_->start();
  watch_stop();
  transition(VmEvent::kStart);
  return {};
}

void ControlLoop::watch_stop() {
  Machine* raw = machine_.get();
  CommandQueue* q = queue_.get();
  // This thread runs device activation/reset from now on (DeviceActivator; vCPUs wait for it).
  if (DeviceActivator* a = raw->activator()) a->attach([q] { q->push(cmd::DeviceWork{}); });
  stop_waiter_ = std::thread([raw, q] {
    pthread_setname_np(pthread_self(), "stop-waiter");
    q->push(cmd::GuestStopped{raw->wait_stopped()});
  });
}

int ControlLoop::run() {
  pollfd pfd{queue_->fd().get(), POLLIN, 0};
  while (!done_) {
    if (::poll(&pfd, 1, -1) < 0) {
      if (errno == EINTR) continue;
      std::fprintf(stderr, "tern: control loop: poll: %s\n", std::strerror(errno));
      return kExitError;
    }
    for (Command& c : queue_->drain()) {
      std::visit([this](auto& x) { handle(x); }, c);
    }
  }
  return exit_status_;
}

// A request handler is a boundary like a thread entry: whatever it throws (a bug, or bad_alloc)
// becomes a 500 for that client and the VM keeps running; an uncaught exception would end tern.
void ControlLoop::handle(cmd::Api& c) {
  const bool create = std::holds_alternative<api::CreateSnapshot>(c.request);
  try {
    if (create) {
      create_snapshot(std::get<api::CreateSnapshot>(c.request).value, c.reply);
      return;
    }
    c.reply(execute(c.request));
  } catch (const std::exception& e) {
    spdlog::error("API request failed: {}", e.what());
    // A save thread that started answers by itself (handle(cmd::SnapshotSaved&)).
    if (create && saver_.joinable() && save_reply_) return;
    if (create) save_reply_ = nullptr;
    c.reply(ApiResponse::error(500, std::string("internal error: ") + e.what()));
  }
}

void ControlLoop::handle(cmd::Signal& c) {
  if (signo_ == 0) signo_ = c.signo;
  if (life_.has_vm()) {
    cancel_save_ = true;  // a save in progress stops; GuestStopped waits for it
    machine_->stop(StopEvent{StopKind::kStopped, -1, 0, strsignal(c.signo)});
    return;  // GuestStopped follows
  }
  if (life_.allows(VmEvent::kStart)) {  // no VM yet
    events_.publish({{"event", "exit"}, {"reason", strsignal(c.signo)}});
    std::fprintf(stderr, "tern: stopped by %s before the VM started\n", strsignal(c.signo));
    exit_status_ = kExitSignalBase + c.signo;
    done_ = true;
  }
}

void ControlLoop::handle(cmd::DeviceWork&) {
  if (machine_)
    if (DeviceActivator* a = machine_->activator()) a->run_pending();
}

void ControlLoop::handle(cmd::GuestStopped& c) {
  if (stop_waiter_.joinable()) stop_waiter_.join();
  // A save in progress reads vCPU and device state: let it finish before the VM is torn down.
  if (saver_.joinable()) {
    saver_.join();
    for (Command& pending : queue_->drain())  // its SnapshotSaved is among these: answer it
      std::visit([this](auto& x) { handle(x); }, pending);
  }
  machine_->finish();
  const StopEvent& e = c.event;
  int status = exit_status_for(e.kind);
  // Reboot in place: a reset request (not a power-off or signal that came meanwhile: those
  // change the state or signo_ first) with --on-reboot restart.
  const bool reset_request = e.kind == StopKind::kReboot || e.kind == StopKind::kTripleFault;
  if (reset_request && machine_->on_reboot() == OnReboot::kRestart) {
    if (signo_ == 0 && (life_.state() == VmState::kRunning || life_.state() == VmState::kPaused)) {
      if (restart_guest(e, status)) return;
    } else {
      // A stop signal or power-off came while the guest was resetting: with restart a reset is
      // not a reason to stop, so tern ends for what was asked (128+N, or 0).
      status = life_.state() == VmState::kStopping ? kExitPowerOff : kExitSignalBase + signo_;
    }
  }
  if (e.kind == StopKind::kStopped)
    status = life_.state() == VmState::kStopping ? kExitPowerOff
                                                 : kExitSignalBase + (signo_ ? signo_ : 15);
  nlohmann::json ev = {{"event", "stop"},
                       {"reason", stop_kind_name(e.kind)},
                       {"detail", e.detail},
                       {"exit_status", status}};
  if (e.vcpu >= 0) ev["vcpu"] = e.vcpu;
  events_.publish(std::move(ev));
  transition(VmEvent::kGuestStopped);
  if (status != 0) {
    std::string where = e.vcpu >= 0 ? fmt::format(" (vCPU {}, RIP {:#x})", e.vcpu, e.rip) : "";
    std::fprintf(stderr, "tern: guest stopped: %s: %s%s\n", stop_kind_name(e.kind),
                 e.detail.c_str(), where.c_str());
  }
  exit_status_ = status;
  done_ = true;
}

bool ControlLoop::restart_guest(const StopEvent& e, int& status) {
  ++resets_;
  last_reset_reason_ = stop_kind_name(e.kind);
  spdlog::info("guest reset #{} ({}: {}): restarting the VM in place", resets_, last_reset_reason_,
               e.detail);
  nlohmann::json ev = {{"event", "reset"},
                       {"reason", last_reset_reason_},
                       {"detail", e.detail},
                       {"count", resets_}};
  if (e.vcpu >= 0) ev["vcpu"] = e.vcpu;
  if (auto r = machine_->reset(); !r) {
    std::fprintf(stderr, "tern: guest reset failed: %s\n", r.error().message().c_str());
    ev["error"] = r.error().message();
    events_.publish(std::move(ev));
    status = kExitError;
    machine_.reset();  // no VM is left to serve (GET /tern/stats answers without one)
    return false;
  }
  // In-kernel exit accounting as the user last set it, before the first KVM_RUN (as at boot).
  if (resources_.kernel_exits)
    if (auto on = machine_->set_kernel_exits(true); !on)
      spdlog::warn("{} (the VM runs without in-kernel exit accounting)", on.error().message());
  machine_->start();
  // A pause that came after the guest's request but before this: the new VM is paused too.
  if (life_.state() == VmState::kPaused) machine_->pause();
  watch_stop();
  // Published once the new VM runs: whoever reads it can talk to (or stop) the new VM.
  events_.publish(std::move(ev));
  return true;
}

ApiResponse ControlLoop::state_error(const std::string& what) const {
  return ApiResponse::error(400, what + ": the VM is " + life_.name());
}

// A pre-boot configuration request: refused once a VM exists; `write` changes resources_ (an
// error there is a 400 naming the field and changes nothing).
ApiResponse ControlLoop::configure_request(const char* what,
                                           const std::function<Result<void>()>& write) {
  if (!life_.allows(VmEvent::kConfigure)) return state_error(what);
  if (auto ok = write(); !ok) return ApiResponse::error(400, ok.error().message());
  transition(VmEvent::kConfigure);
  return ApiResponse::no_content();
}

nlohmann::json ControlLoop::instance_info() const {
  return {{"id", "anonymous-instance"},
          {"state", life_.name()},
          {"vmm_version", TERN_VERSION},
          {"app_name", "tern"}};
}

ApiResponse ControlLoop::instance_start() {
  if (!life_.allows(VmEvent::kStart)) return state_error("InstanceStart");
  if (!resources_.boot) return ApiResponse::error(400, "InstanceStart: no boot source (PUT /boot-source first)");
  auto ok = start();
  if (!ok) return ApiResponse::error(400, "InstanceStart: " + with_api_field_names(ok.error().error).message());
  return ApiResponse::no_content();
}

ApiResponse ControlLoop::execute(const ApiRequest& request) {
  auto ok = ApiResponse::no_content;
  VmResources& res = resources_;
  return std::visit(
      Overloaded{
          [&](const api::GetInstanceInfo&) { return ApiResponse::json(instance_info()); },
          [&](const api::GetVersion&) {
            return ApiResponse::json(
                {{"firecracker_version", TERN_VERSION}, {"tern_version", TERN_VERSION}});
          },
          [&](const api::PutBootSource& r) {
            return configure_request("PUT /boot-source is pre-boot only", [&]() -> Result<void> {
              res.boot = r.value;
              return {};
            });
          },
          [&](const api::GetMachineConfig&) {
            return ApiResponse::json(to_json(res.machine_config()));
          },
          [&](const api::PutMachineConfig& r) {
            return configure_request("PUT /machine-config is pre-boot only",
                                     [&]() -> Result<void> {
                                       res.set_machine_config(r.value);
                                       return {};
                                     });
          },
          [&](const api::PatchMachineConfig& r) {
            return configure_request("PATCH /machine-config is pre-boot only",
                                     [&] { return res.patch_machine_config(r.value); });
          },
          [&](const api::PutDrive& r) {
            return configure_request("PUT /drives is pre-boot only",
                                     [&] { return res.put_drive(r.value); });
          },
          [&](const api::PutDevice& r) {
            std::string what = "PUT " + r.path + " is pre-boot only";
            return configure_request(what.c_str(), [&]() -> Result<void> {
              ASSIGN_OR_RETURN(DeviceSpec spec, device_spec_of(r.kind, r.spec));
              res.put_device(std::move(spec));
              return {};
            });
          },
          [&](const api::PutKeyedDevice& r) {
            std::string what = "PUT " + r.path + " is pre-boot only";
            return configure_request(what.c_str(), [&]() -> Result<void> {
              ASSIGN_OR_RETURN(DeviceSpec spec, device_spec_of(r.kind, r.spec));
              res.put_device(std::move(spec));
              return {};
            });
          },
          [&](const api::PatchKeyedDevice& r) {
            // Nothing to change yet (the body was checked); allowed before and after boot.
            if (!res.has_device(r.kind, r.id))
              return ApiResponse::error(404, "PATCH " + r.path + "/" + r.id + ": no device \"" +
                                                 r.id + "\" is configured");
            return ok();
          },
          [&](const api::InstanceStart&) { return instance_start(); },
          [&](const api::SendCtrlAltDel&) {
            if (!life_.allows(VmEvent::kCtrlAltDel)) return state_error("SendCtrlAltDel");
            if (!machine_->send_ctrl_alt_del())
              return ApiResponse::error(
                  400, "SendCtrlAltDel: the guest's keyboard is not taking input (disabled or "
                       "its buffer is full)");
            events_.publish({{"event", "ctrl-alt-del"}});
            return ok();
          },
          [&](const api::FlushMetrics&) { return ok(); },
          [&](const api::PauseVm&) {
            if (!life_.allows(VmEvent::kPause)) return state_error("cannot pause");
            machine_->pause();
            transition(VmEvent::kPause);
            return ok();
          },
          [&](const api::ResumeVm&) {
            if (life_.state() == VmState::kSaving)
              return ApiResponse::error(400, "cannot resume: a snapshot is being saved (PUT "
                                             "/tern/power-off cancels it and stops the VM)");
            if (!life_.allows(VmEvent::kResume)) return state_error("cannot resume");
            resume_machine();
            return ok();
          },
          [&](const api::GetVmConfig&) { return ApiResponse::json(res.vm_config_json()); },
          [&](const api::GetStats&) {
            nlohmann::json j = machine_ ? machine_->stats().stats_json() : nlohmann::json::object();
            // Always present ("enabled": false before the VM is built; "requested" when it will
            // start with the VM).
            if (!j.contains("kernel_exits")) {
              j["kernel_exits"] = {{"enabled", false}};
              if (res.kernel_exits) j["kernel_exits"]["requested"] = true;
            }
            j["snapshot"] = progress_.json();
            j["lifecycle"] = {{"resets", resets_}};
            if (resets_ > 0) j["lifecycle"]["last_reset_reason"] = last_reset_reason_;
            return ApiResponse::json(j);
          },
          [&](const api::GetMetrics&) {
            return ApiResponse::text(machine_ ? machine_->stats().metrics_text() : std::string(),
                                     "text/plain; version=0.0.4");
          },
          [&](const api::GetEvents&) {
            // Served by the API server from the EventLog; never queued.
            return ApiResponse::error(500, "GET /tern/events reached the control loop");
          },
          [&](const api::CreateSnapshot&) {
            return ApiResponse::error(500, "PUT /snapshot/create reached execute()");
          },
          [&](const api::LoadSnapshot& r) { return load_snapshot(r.value); },
          [&](const api::PutKernelExits& r) {
            // Before the VM is built: the configuration (on from the first KVM_RUN). After: the
            // running VM's accounting, now; 400 with the reason when it cannot start.
            if (machine_) {
              if (auto on = machine_->set_kernel_exits(r.value.enabled); !on)
                return ApiResponse::error(400, "PUT /tern/kernel-exits: " + on.error().message());
            }
            res.kernel_exits = r.value.enabled;
            return ok();
          },
          [&](const api::PowerOff&) {
            if (!life_.allows(VmEvent::kPowerOff)) return state_error("power-off");
            cancel_save_ = true;  // a save in progress stops and fails with "cancelled"
            transition(VmEvent::kPowerOff);
            machine_->stop(StopEvent{StopKind::kStopped, -1, 0, "power-off requested through the API"});
            return ok();
          },
      },
      request);
}

}  // namespace tern
