#include "cli/snapshot_command.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "api/api_client.h"
#include "api/api_request.h"
#include "base/size.h"
#include "cli/vmm_runner.h"
#include "stats/stats_table.h"
#include "vmm/control_loop.h"
#include "vmm/exit_status.h"

namespace tern {

namespace {

using Clock = std::chrono::steady_clock;

int die(const std::string& msg) {
  std::fprintf(stderr, "tern: snapshot: %s\n", msg.c_str());
  return kExitError;
}

std::string fault_of(const HttpReply& r) {
  auto j = nlohmann::json::parse(r.body, nullptr, false);
  if (j.is_object() && j.contains("fault_message") && j["fault_message"].is_string())
    return j["fault_message"].get<std::string>();
  return "HTTP " + std::to_string(r.status) + " " + r.body;
}

// One progress line: "[#####.....] 312/1024 MiB  845 MiB/s". On a terminal it redraws in place.
void draw_progress(const nlohmann::json& s, bool tty) {
  uint64_t done = s.value("done_bytes", uint64_t{0}), total = s.value("total_bytes", uint64_t{0});
  uint64_t rate = s.value("bytes_per_s", uint64_t{0});
  int filled = total ? static_cast<int>(30 * done / total) : 0;
  std::string bar(filled, '#');
  bar.resize(30, '.');
  std::fprintf(stderr, "%stern: snapshot [%s] %llu/%llu MiB  %llu MiB/s%s", tty ? "\r" : "",
               bar.c_str(), static_cast<unsigned long long>(done >> 20),
               static_cast<unsigned long long>(total >> 20),
               static_cast<unsigned long long>(rate >> 20), tty ? "" : "\n");
  std::fflush(stderr);
}

// The stop signal the client got (0: none). Set by on_interrupt, read by run_snapshot's loop.
volatile std::sig_atomic_t g_interrupted = 0;

extern "C" void on_interrupt(int signo) { g_interrupted = signo; }

// While it lives, SIGINT, SIGTERM and SIGHUP only set g_interrupted: the client then resumes the
// VM it paused before it exits, instead of dying and leaving the VM paused. A second signal acts
// as usual (SA_RESETHAND: the user can still kill a client whose server never answers). A signal
// the client was started with ignored (nohup's SIGHUP, a background job's SIGINT) stays ignored:
// the user asked for it not to stop the client, so it must not resume the VM either.
class InterruptGuard {
 public:
  InterruptGuard() {
    g_interrupted = 0;
    struct sigaction sa {};
    sa.sa_handler = on_interrupt;
    sa.sa_flags = SA_RESETHAND | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < kSignals.size(); ++i) {
      if (::sigaction(kSignals[i], nullptr, &previous_[i]) != 0 ||
          previous_[i].sa_handler == SIG_IGN)
        continue;
      installed_[i] = ::sigaction(kSignals[i], &sa, nullptr) == 0;
    }
  }
  ~InterruptGuard() {
    for (size_t i = 0; i < kSignals.size(); ++i)
      if (installed_[i]) ::sigaction(kSignals[i], &previous_[i], nullptr);
  }
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

 private:
  static constexpr std::array<int, 3> kSignals = {SIGINT, SIGTERM, SIGHUP};
  std::array<struct sigaction, 3> previous_{};
  std::array<bool, 3> installed_{};
};

}  // namespace

CLI::App* add_snapshot_command(CLI::App& app, SnapshotOptions& o) {
  CLI::App* c = app.add_subcommand(
      "snapshot", "Save a running tern's VM to a state file and a memory file (through its API)");
  c->add_option("--api-sock", o.api_sock, "The running tern's API socket")->required();
  c->add_option("--state", o.state, "State file to write (vCPU, device and KVM state)")->required();
  c->add_option("--mem", o.mem,
                "Memory file to write (guest RAM by guest-physical address, sparse)")
      ->required();
  c->add_option("--rate-limit", o.rate_limit,
                "Cap the memory file write rate per second: 100M, 1G (K/M/G are binary; a bare "
                "number is MiB, as for --memory). Default: no limit");
  c->add_flag("--direct", o.direct, "Write the memory file with O_DIRECT (bypass the page cache)");
  c->add_flag("--exit", o.exit_after, "Power the VM off once saved (its tern exits with status 0)");
  c->add_flag("--keep-paused", o.keep_paused, "Leave the VM paused once saved");
  return c;
}

CLI::App* add_restore_command(CLI::App& app, RestoreOptions& o) {
  CLI::App* c = app.add_subcommand(
      "restore", "Rebuild a VM from a snapshot in this process and run it until it stops");
  c->add_option("--state", o.state, "State file written by tern snapshot")->required();
  c->add_option("--mem", o.mem, "Memory file written by tern snapshot (mapped copy-on-write)")
      ->required();
  c->add_option("--api-sock", o.api_sock, "Serve the control API on this Unix socket");
  c->add_flag("--resume", o.resume,
              "Resume the guest at once (default: wait paused for PATCH /vm Resumed)");
  c->add_option("--console", o.console, "Guest serial console: stdio or file:PATH")
      ->capture_default_str();
  c->add_flag("--stats-on-exit", o.stats_on_exit,
              "Print exit, device, KVM and CPU statistics on stderr when the VM stops");
  c->add_flag("--kernel-exits", o.kernel_exits,
              "Count every VM exit in the kernel by hardware reason from before the restored "
              "vCPUs first run, as tern run --kernel-exits (not saved in snapshots; needs "
              "CAP_BPF and CAP_PERFMON or root, tracefs, kernel BTF). When it cannot start, one "
              "warning says why and the VM runs without it");
  c->add_option("--memory-backend", o.memory_backend,
                "What backs the restored RAM: anon (the memory file mapped copy-on-write), memfd "
                "or hugetlbfs (the file read into shared RAM). Default: memfd with a vhost-user "
                "disk, else anon");
  c->add_option("--on-reboot", o.on_reboot,
                "What a guest reboot does: exit (status 3) or restart (in place, through the "
                "firmware; firmware-booted snapshots only). Default: what the saved VM did "
                "(restart for a firmware boot unless it ran with --on-reboot exit)");
  c->add_option("--cpu-affinity", o.cpu_affinity,
                std::string(kCpuAffinityHelp) + ". Not saved in snapshots: give it again here");
  return c;
}

int run_snapshot(const SnapshotOptions& o) {
  InterruptGuard interrupt;
  if (o.exit_after && o.keep_paused) return die("--exit and --keep-paused exclude each other");
  uint64_t rate = 0;
  if (!o.rate_limit.empty()) {
    auto r = parse_size(o.rate_limit, "--rate-limit");
    if (!r) return die(r.error().message());
    if (*r > (uint64_t{1} << 50))
      return die("--rate-limit " + o.rate_limit + ": above 1P per second");
    rate = *r;
  }
  // The VMM opens the files: give it absolute paths, resolved here, where the user typed them.
  std::error_code ec;
  std::string state = std::filesystem::absolute(o.state, ec).string();
  if (ec) return die("--state " + o.state + ": " + ec.message());
  std::string mem = std::filesystem::absolute(o.mem, ec).string();
  if (ec) return die("--mem " + o.mem + ": " + ec.message());
  // The API carries paths as JSON strings: a path that is not UTF-8 cannot be sent as it is (and
  // json_text() would send another path), so it is refused here, naming the option.
  for (const auto& [opt, path] : {std::pair{"--state", &state}, std::pair{"--mem", &mem}}) {
    if (nlohmann::json::parse(json_text(*path)).get<std::string>() != *path)
      return die(std::string(opt) + ": the path is not valid UTF-8; the API cannot carry it");
  }
  nlohmann::json body = {{"snapshot_type", "Full"},
                         {"snapshot_path", state},
                         {"mem_file_path", mem},
                         {"rate_limit_bytes_per_s", rate},
                         {"direct", o.direct}};
  auto info = api_request(o.api_sock, "GET", "/");
  if (!info) return die(info.error().message());
  auto vm_state = nlohmann::json::parse(info->body, nullptr, false).value("state", std::string());
  bool paused_here = false;
  auto pause_t0 = Clock::now();
  if (vm_state == "Running") {
    auto r = api_request(o.api_sock, "PATCH", "/vm", R"({"state":"Paused"})");
    if (!r) return die(r.error().message());
    if (r->status >= 300) return die("pause: " + fault_of(*r));
    paused_here = true;
  } else if (vm_state != "Paused") {
    return die("the VM is " + (vm_state.empty() ? std::string("unknown") : vm_state) +
               "; only a running or paused VM can be saved");
  }
  // True when the VM runs again afterwards.
  auto resume_if_paused_here = [&] {
    if (!paused_here) return false;
    auto r = api_request(o.api_sock, "PATCH", "/vm", R"({"state":"Resumed"})");
    return r && r->status < 300;
  };
  // Interrupted (Ctrl-C, SIGTERM, SIGHUP): the VM is left as the client found it — resumed if it
  // paused it, whatever --keep-paused or --exit asked — and the exit status is 128 + signal.
  auto interrupted = [&](const std::string& what) {
    const int signo = g_interrupted;
    bool resumed = resume_if_paused_here();
    std::string vm = !paused_here ? "the VM stays paused as it was"
                     : resumed    ? "the VM was resumed"
                                  : "resuming the VM failed: it is paused";
    std::fprintf(stderr, "tern: snapshot: interrupted (%s): %s; %s\n", strsignal(signo),
                 what.c_str(), vm.c_str());
    return 128 + signo;
  };
  if (g_interrupted) return interrupted("nothing saved");

  const bool tty = ::isatty(STDERR_FILENO);
  auto create = std::async(std::launch::async, [&] {
    return api_request(o.api_sock, "PUT", "/snapshot/create", body.dump(), std::chrono::hours(24));
  });
  auto last_line = Clock::now() - std::chrono::seconds(10);
  bool told = false;
  while (create.wait_for(std::chrono::milliseconds(tty ? 100 : 250)) != std::future_status::ready) {
    if (g_interrupted && !told) {
      // The save cannot be called off through the API: wait for it, then resume the VM.
      std::fprintf(stderr,
                   "%stern: snapshot: interrupted: waiting for the save in progress to end, then "
                   "resuming the VM (interrupt again to leave it paused)\n",
                   tty ? "\n" : "");
      told = true;
    }
    if (!tty && Clock::now() - last_line < std::chrono::seconds(1)) continue;
    auto st = api_request(o.api_sock, "GET", "/tern/stats");
    if (!st || st->status != 200) continue;
    auto j = nlohmann::json::parse(st->body, nullptr, false);
    if (!j.is_object() || !j.contains("snapshot")) continue;
    if (j["snapshot"].value("phase", "") != "saving") continue;
    draw_progress(j["snapshot"], tty);
    last_line = Clock::now();
  }
  auto created = create.get();
  if (tty) std::fputc('\n', stderr);
  if (g_interrupted) {
    if (!created) return interrupted("the save: " + created.error().message());
    if (created->status >= 300) return interrupted("the save failed: " + fault_of(*created));
    return interrupted("the save completed (" + state + ", " + mem + ")");
  }
  if (!created) {
    (void)resume_if_paused_here();
    return die(created.error().message());
  }
  if (created->status >= 300) {
    bool resumed = resume_if_paused_here();
    return die(fault_of(*created) + (resumed ? " (the VM was resumed)" : ""));
  }
  nlohmann::json done;
  if (auto st = api_request(o.api_sock, "GET", "/tern/stats"); st && st->status == 200) {
    auto j = nlohmann::json::parse(st->body, nullptr, false);
    if (j.is_object() && j.contains("snapshot")) done = j["snapshot"];
  }
  if (o.exit_after) {
    auto r = api_request(o.api_sock, "PUT", "/tern/power-off");
    if (!r || r->status >= 300)
      return die("saved, but power-off failed: " + (r ? fault_of(*r) : r.error().message()));
  } else if (!o.keep_paused) {
    (void)resume_if_paused_here();
  }
  double pause_ms =
      paused_here ? std::chrono::duration<double, std::milli>(Clock::now() - pause_t0).count() : 0;
  // "paused P ms" is what bench/snapshot reads from this line.
  std::string paused = paused_here ? fmt::format("paused {:.0f} ms", pause_ms)
                                   : std::string("the VM was already paused");
  if (o.exit_after)
    paused += ", then powered off (--exit)";
  else if (!paused_here || o.keep_paused)
    paused += paused_here ? ", stays paused (--keep-paused)" : " and stays paused";
  double secs = done.value("seconds", 0.0);
  uint64_t total = done.value("total_bytes", uint64_t{0});
  std::fprintf(stderr,
               "tern: snapshot: wrote %s and %s: %llu MiB (%llu MiB allocated) in %.3f s "
               "(%.0f MiB/s), %s\n",
               state.c_str(), mem.c_str(), static_cast<unsigned long long>(total >> 20),
               static_cast<unsigned long long>(done.value("written_bytes", uint64_t{0}) >> 20),
               secs, secs > 0 ? (total / 1048576.0) / secs : 0.0, paused.c_str());
  return 0;
}

int run_restore(const RestoreOptions& o) {
  EventLog events;
  auto loop = ControlLoop::create(create_vm_machine, events, create_restored_machine);
  if (!loop) {
    std::fprintf(stderr, "tern: %s\n", loop.error().message().c_str());
    return kExitError;
  }
  SnapshotLoadSpec spec{o.state, o.mem, o.resume};
  if (!o.memory_backend.empty()) {
    auto b = parse_memory_backend(o.memory_backend);
    if (!b) {
      std::fprintf(stderr, "tern: %s\n", b.error().message().c_str());
      return kExitError;
    }
    spec.memory_backend = *b;
  }
  if (!o.on_reboot.empty()) {
    spec.on_reboot = parse_on_reboot(o.on_reboot);
    if (!spec.on_reboot) {
      std::fprintf(stderr, "tern: --on-reboot: \"%s\" is not one of exit, restart\n",
                   o.on_reboot.c_str());
      return kExitError;
    }
  }
  if (!o.cpu_affinity.empty()) {
    auto a = parse_cpu_affinity(o.cpu_affinity, "--cpu-affinity");
    if (!a) {
      std::fprintf(stderr, "tern: %s\n", a.error().message().c_str());
      return kExitError;
    }
    spec.cpu_affinity = *a;  // checked against the snapshot's vCPUs by prepare_restore()
  }
  ControlLoop* l = loop->get();
  if (o.kernel_exits) l->request_kernel_exits();
  int status = run_vmm(**loop, events, o.api_sock, false,
                       [l, &spec, &o] { return l->restore(spec, o.console); });
  if (o.stats_on_exit) {
    if (const StatsSource* stats = (*loop)->stats())
      std::fputs(render_summary(stats->stats_json()).c_str(), stderr);
  }
  return status;
}

}  // namespace tern
