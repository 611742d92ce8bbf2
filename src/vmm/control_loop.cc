#include "vmm/control_loop.h"

#include <poll.h>

#include <cstdio>
#include <cstring>

#include "api/api_parser.h"
#include "base/log.h"
#include "devices/device_activator.h"
#include "vmm/exit_status.h"

namespace tern {

namespace {

template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;  // clang-14 has no aggregate deduction (P1816) yet

// prepare_boot() names command-line options; API users configured the same things by these names.
Error with_api_field_names(Error e) {
  static const std::pair<const char*, const char*> names[] = {
      {"--kernel", "boot-source.kernel_image_path"}, {"--initrd", "boot-source.initrd_path"},
      {"--cmdline", "boot-source.boot_args"},        {"--memory", "machine-config.mem_size_mib"},
      {"--cpus", "machine-config.vcpu_count"}};
  for (auto [cli, api] : names)
    if (e.op == cli) e.op = api;
  return e;
}

}  // namespace

Result<std::unique_ptr<ControlLoop>> ControlLoop::create(MachineFactory factory, EventLog& events,
                                                         RestoreFactory restore) {
  auto loop = std::unique_ptr<ControlLoop>(
      new ControlLoop(std::move(factory), events, std::move(restore)));
  ASSIGN_OR_RETURN(loop->queue_, CommandQueue::create());
  loop->config_.memory_bytes = loop->machine_cfg_.mem_size_mib << 20;
  loop->config_.cmdline = kDefaultCmdline;
  events.publish({{"event", "state"}, {"state", vm_state_name(loop->state_)}});
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

void ControlLoop::configure(const VmConfig& config, const std::optional<BootSource>& boot,
                            const MachineConfig& machine, std::vector<DriveSpec> drives) {
  config_ = config;
  boot_ = boot;
  machine_cfg_ = machine;
  drives_ = std::move(drives);
}

void ControlLoop::set_state(VmState s) {
  state_ = s;
  events_.publish({{"event", "state"}, {"state", vm_state_name(s)}});
}

tl::expected<void, StartFailure> ControlLoop::start() {
  auto m = factory_(config_, drives_);
  if (!m) return tl::unexpected(m.error());
  machine_ = std::move(*m);
  machine_->start();
  machine_started_ = true;
  watch_stop();
  set_state(VmState::kRunning);
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
  if (machine_ && state_ != VmState::kStopped) {
    cancel_save_ = true;  // a save in progress stops; GuestStopped waits for it
    machine_->stop(StopEvent{StopKind::kStopped, -1, 0, strsignal(c.signo)});
    return;  // GuestStopped follows
  }
  if (state_ == VmState::kNotStarted) {
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
  if (e.kind == StopKind::kStopped)
    status = power_off_requested_ ? kExitPowerOff : kExitSignalBase + (signo_ ? signo_ : 15);
  nlohmann::json ev = {{"event", "stop"},
                       {"reason", stop_kind_name(e.kind)},
                       {"detail", e.detail},
                       {"exit_status", status}};
  if (e.vcpu >= 0) ev["vcpu"] = e.vcpu;
  events_.publish(std::move(ev));
  set_state(VmState::kStopped);
  if (status != 0) {
    std::string where = e.vcpu >= 0 ? fmt::format(" (vCPU {}, RIP {:#x})", e.vcpu, e.rip) : "";
    std::fprintf(stderr, "tern: guest stopped: %s: %s%s\n", stop_kind_name(e.kind),
                 e.detail.c_str(), where.c_str());
  }
  exit_status_ = status;
  done_ = true;
}

ApiResponse ControlLoop::state_error(const std::string& what) const {
  return ApiResponse::error(400, what + ": the VM is " + vm_state_name(state_));
}

nlohmann::json ControlLoop::instance_info() const {
  return {{"id", "anonymous-instance"},
          {"state", vm_state_name(state_)},
          {"vmm_version", TERN_VERSION},
          {"app_name", "tern"}};
}

nlohmann::json ControlLoop::vm_config_json() const {
  nlohmann::json drives = nlohmann::json::array();
  for (const auto& d : drives_) drives.push_back(to_json(d));
  MachineConfig m = machine_cfg_;
  m.vcpu_count = config_.vcpus;
  m.mem_size_mib = config_.memory_bytes >> 20;
  return {{"boot-source", boot_ ? to_json(*boot_) : nlohmann::json(nullptr)},
          {"machine-config", to_json(m)},
          {"drives", drives},
          {"balloon", nullptr},
          {"cpu-config", nullptr},
          {"network-interfaces", nlohmann::json::array()},
          {"vsock", nullptr},
          {"logger", nullptr},
          {"metrics", nullptr},
          {"mmds-config", nullptr},
          {"entropy", nullptr},
          {"pmem", nlohmann::json::array()},
          {"memory-hotplug", nullptr}};
}

ApiResponse ControlLoop::instance_start() {
  if (state_ != VmState::kNotStarted) return state_error("InstanceStart");
  if (!boot_) return ApiResponse::error(400, "InstanceStart: no boot source (PUT /boot-source first)");
  auto ok = start();
  if (!ok) return ApiResponse::error(400, "InstanceStart: " + with_api_field_names(ok.error().error).message());
  return ApiResponse::no_content();
}

ApiResponse ControlLoop::execute(const ApiRequest& request) {
  const bool pre_boot = state_ == VmState::kNotStarted;
  auto ok = ApiResponse::no_content;
  return std::visit(
      Overloaded{
          [&](const api::GetInstanceInfo&) { return ApiResponse::json(instance_info()); },
          [&](const api::GetVersion&) {
            return ApiResponse::json(
                {{"firecracker_version", TERN_VERSION}, {"tern_version", TERN_VERSION}});
          },
          [&](const api::PutBootSource& r) {
            if (!pre_boot) return state_error("PUT /boot-source is pre-boot only");
            boot_ = r.value;
            configured_ = true;
            config_.kernel_path = r.value.kernel_image_path;
            config_.initrd_path = r.value.initrd_path;
            config_.cmdline =
                r.value.boot_args ? with_default_console(*r.value.boot_args) : kDefaultCmdline;
            return ok();
          },
          [&](const api::GetMachineConfig&) {
            MachineConfig m = machine_cfg_;
            m.vcpu_count = config_.vcpus;
            m.mem_size_mib = config_.memory_bytes >> 20;
            return ApiResponse::json(to_json(m));
          },
          [&](const api::PutMachineConfig& r) {
            if (!pre_boot) return state_error("PUT /machine-config is pre-boot only");
            machine_cfg_ = r.value;
            configured_ = true;
            config_.vcpus = r.value.vcpu_count;
            config_.memory_bytes = r.value.mem_size_mib << 20;
            return ok();
          },
          [&](const api::PatchMachineConfig& r) {
            if (!pre_boot) return state_error("PATCH /machine-config is pre-boot only");
            MachineConfig m = machine_cfg_;
            m.vcpu_count = r.value.vcpu_count.value_or(config_.vcpus);
            m.mem_size_mib = r.value.mem_size_mib.value_or(config_.memory_bytes >> 20);
            if (r.value.smt) m.smt = *r.value.smt;
            if (r.value.track_dirty_pages) m.track_dirty_pages = *r.value.track_dirty_pages;
            if (r.value.huge_pages) m.huge_pages = *r.value.huge_pages;
            if (auto valid = check_machine_config(m, ""); !valid)
              return ApiResponse::error(400, valid.error().message());
            machine_cfg_ = m;
            configured_ = true;
            config_.vcpus = m.vcpu_count;
            config_.memory_bytes = m.mem_size_mib << 20;
            return ok();
          },
          [&](const api::PutDrive& r) {
            if (!pre_boot) return state_error("PUT /drives is pre-boot only");
            for (auto& d : drives_) {
              if (d.drive_id == r.value.drive_id) {
                d = r.value;
                return ok();
              }
              if (d.is_root_device && r.value.is_root_device)
                return ApiResponse::error(400, "is_root_device: drive \"" + d.drive_id +
                                                   "\" is already the root device");
            }
            drives_.push_back(r.value);
            configured_ = true;
            return ok();
          },
          [&](const api::InstanceStart&) { return instance_start(); },
          [&](const api::SendCtrlAltDel&) {
            if (state_ != VmState::kRunning) return state_error("SendCtrlAltDel");
            if (!machine_->send_ctrl_alt_del())
              return ApiResponse::error(
                  400, "SendCtrlAltDel: the guest's keyboard is not taking input (disabled or "
                       "its buffer is full)");
            events_.publish({{"event", "ctrl-alt-del"}});
            return ok();
          },
          [&](const api::FlushMetrics&) { return ok(); },
          [&](const api::PauseVm&) {
            if (state_ != VmState::kRunning) return state_error("cannot pause");
            machine_->pause();
            set_state(VmState::kPaused);
            return ok();
          },
          [&](const api::ResumeVm&) {
            if (state_ != VmState::kPaused) return state_error("cannot resume");
            if (progress_.saving())
              return ApiResponse::error(400, "cannot resume: a snapshot is being saved (PUT "
                                             "/tern/power-off cancels it and stops the VM)");
            resume_machine();
            return ok();
          },
          [&](const api::GetVmConfig&) { return ApiResponse::json(vm_config_json()); },
          [&](const api::GetStats&) {
            nlohmann::json j = machine_ ? machine_->stats().stats_json() : nlohmann::json::object();
            j["snapshot"] = progress_.json();
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
          [&](const api::PowerOff&) {
            if (state_ != VmState::kRunning && state_ != VmState::kPaused)
              return state_error("power-off");
            cancel_save_ = true;  // a save in progress stops and fails with "cancelled"
            power_off_requested_ = true;
            machine_->stop(StopEvent{StopKind::kStopped, -1, 0, "power-off requested through the API"});
            return ok();
          },
      },
      request);
}

}  // namespace tern
