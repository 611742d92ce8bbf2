#include "cli/stat_command.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <thread>

#include "api/api_client.h"
#include "cli/stat_all.h"
#include "stats/stats_table.h"
#include "vmm/exit_status.h"

namespace tern {

Result<nlohmann::json> fetch_stats(const std::string& sock) {
  // A tern's reply is tens of kB (a few hundred with hundreds of vCPUs and threads); a bigger one
  // is refused before parsing, as tern stat --all holds two parsed replies per VM (a 60 MB reply
  // took 1.5 GB).
  constexpr size_t kMaxReply = 8 * 1024 * 1024;
  ASSIGN_OR_RETURN(std::string body,
                   api_get(sock, "/tern/stats", std::chrono::seconds(10), kMaxReply));
  // tern's reply nests a few levels; a deeper one (not tern's) is refused here, as copying and
  // printing a JSON value recurse once per level (100 000 levels overflowed the stack).
  constexpr int kMaxDepth = 32;
  bool too_deep = false;
  auto j = nlohmann::json::parse(
      body,
      [&](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
        if (depth > kMaxDepth) too_deep = true;
        return !too_deep;
      },
      /*allow_exceptions=*/false);
  if (too_deep)
    return fail("GET /tern/stats",
                sock + ": the reply nests deeper than " + std::to_string(kMaxDepth) + " levels");
  if (j.is_discarded() || !j.is_object())
    return fail("GET /tern/stats", sock + ": the reply is not a JSON object");
  if (!j.contains("timestamp_ns"))
    return fail("GET /tern/stats", sock + ": no VM statistics yet (is a VM running?)");
  return j;
}

namespace {

// The in-kernel accounting of the VM, while tern stat holds it on: turned on through the API when
// the VM's is off, off again when tern stat ends (return, or one of the signals that would end
// it: SIGINT, SIGTERM, SIGHUP (terminal closed), SIGQUIT, SIGPIPE (stdout's reader gone), which
// are blocked meanwhile and taken by sigtimedwait() as the wait between refreshes).
class KernelExitsHold {
 public:
  explicit KernelExitsHold(std::string sock) : sock_(std::move(sock)) {}
  ~KernelExitsHold() { release(); }
  KernelExitsHold(const KernelExitsHold&) = delete;
  KernelExitsHold& operator=(const KernelExitsHold&) = delete;

  /// Whether a GET /tern/stats reply shows the accounting on (a "kernel_exits" that is not an
  /// object with "enabled": true, e.g. from another server, counts as off).
  static bool shows_on(const nlohmann::json& stats) {
    auto k = stats.find("kernel_exits");
    if (k == stats.end() || !k->is_object()) return false;
    auto e = k->find("enabled");
    return e != k->end() && e->is_boolean() && e->get<bool>();
  }

  /// Turns the accounting on unless `stats` shows it on. When the VM cannot start it, reason()
  /// says why (the PUT's fault_message; the VM's "kernel_exits" also carries it as "error").
  void acquire(const nlohmann::json& stats) {
    if (held_ || shows_on(stats)) return;
    if (!blocked_) {  // before the PUT: no window without cleanup
      ::sigprocmask(SIG_BLOCK, &stop_set(), &old_mask_);
      blocked_ = true;
    }
    auto r = api_request(sock_, "PUT", "/tern/kernel-exits", R"({"enabled": true})",
                         std::chrono::seconds(10));
    held_ = r && r->status == 204;
    if (!held_) {
      unblock();
      if (!r) {
        reason_ = r.error().message();
      } else {
        auto j = nlohmann::json::parse(r->body, nullptr, /*allow_exceptions=*/false);
        reason_ = j.is_object() && j.contains("fault_message") && j["fault_message"].is_string()
                      ? j["fault_message"].get<std::string>()
                      : "PUT /tern/kernel-exits: HTTP " + std::to_string(r->status);
      }
    }
  }
  /// Called with every refresh: when the accounting went off underneath (another tern stat that
  /// had turned it on ended, or a PUT turned it off) and this one had not failed to start it,
  /// this tern stat turns it on again and holds it from now on.
  void keep(const nlohmann::json& stats) {
    if (reason_.empty() && !shows_on(stats)) {
      held_ = false;  // it is off: nothing of ours to turn off unless acquire() succeeds
      acquire(stats);
    }
  }
  /// Why acquire() could not turn the accounting on ("" when it did or did not need to).
  [[nodiscard]] const std::string& reason() const { return reason_; }
  /// Waits `interval`; returns the stop signal that arrived meanwhile, else 0.
  int wait(std::chrono::duration<double> interval) {
    if (!blocked_) {
      std::this_thread::sleep_for(interval);
      return 0;
    }
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(interval).count();
    timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
    const auto deadline = std::chrono::steady_clock::now() + interval;
    for (;;) {
      int s = ::sigtimedwait(&stop_set(), nullptr, &ts);
      if (s > 0) return s;
      if (errno != EINTR) return 0;  // EAGAIN: the interval passed
      auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      deadline - std::chrono::steady_clock::now())
                      .count();
      if (left <= 0) return 0;
      ts = {static_cast<time_t>(left / 1'000'000'000), static_cast<long>(left % 1'000'000'000)};
    }
  }
  /// Turns the accounting off again if this tern stat turned it on (errors ignored: the VM may be
  /// gone) and restores the signal mask.
  void release() {
    if (held_) {
      (void)api_request(sock_, "PUT", "/tern/kernel-exits", R"({"enabled": false})",
                        std::chrono::seconds(5));
      held_ = false;
    }
    unblock();
  }

 private:
  // The signals that would end tern stat: those of the list it was not started ignoring (nohup
  // ignores SIGHUP, a shell's background job SIGINT and SIGQUIT). A blocked signal is queued even
  // when ignored, so blocking an ignored one would make it end tern stat.
  static const sigset_t& stop_set() {
    static const sigset_t set = [] {
      sigset_t s;
      sigemptyset(&s);
      for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE}) {
        struct sigaction now = {};
        if (::sigaction(sig, nullptr, &now) == 0 && now.sa_handler == SIG_IGN) continue;
        sigaddset(&s, sig);
      }
      return s;
    }();
    return set;
  }
  void unblock() {
    if (blocked_) ::sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
    blocked_ = false;
  }
  std::string sock_;
  std::string reason_;
  bool held_ = false;
  bool blocked_ = false;
  sigset_t old_mask_{};
};

}  // namespace

CLI::App* add_stat_command(CLI::App& app, StatOptions& o) {
  CLI::App* s = app.add_subcommand(
      "stat", "Show a running tern's exits, device accesses, KVM counters and CPU per thread");
  s->add_option("--api-sock", o.api_socks,
                "The control API socket of the running tern (with --all: repeatable)");
  s->add_flag("--all", o.all,
              "One line per VM for several running terns (exits/s by class, CPU by thread class, "
              "net and disk rates): every --api-sock and every socket in each --sock-dir");
  s->add_option("--sock-dir", o.sock_dirs,
                "A directory of tern API sockets, scanned at every refresh (repeatable; implies "
                "--all)");
  s->add_option("--interval", o.interval_s, "Seconds between refreshes (rates are per second)")
      ->capture_default_str();
  s->add_flag("--once", o.once, "Measure one interval, print it and exit");
  s->add_flag("--json", o.json, "Print rates and totals as JSON instead of a table");
  s->add_option("--rows", o.rows, "Rows per section in the table (0: all)")->capture_default_str();
  s->add_flag("--kernel-exits", o.kernel_exits,
              "Add the in-kernel exits section (exits by hardware reason reconciled with KVM's "
              "counter, MSRs, in-kernel PIO, nested page faults, injected vectors); turns the VM's "
              "accounting on for as long as tern stat runs when it is off");
  return s;
}

int run_stat(const StatOptions& o) {
  if (!(o.interval_s >= 0.05 && o.interval_s <= 3600)) {
    std::fprintf(stderr, "tern: --interval: %g is outside 0.05 .. 3600 seconds\n", o.interval_s);
    return kExitError;
  }
  if (o.all || !o.sock_dirs.empty()) return run_stat_all(o);
  if (o.api_socks.size() != 1) {
    std::fprintf(stderr, "tern: --api-sock: give one socket (several only with --all)\n");
    return kExitError;
  }
  const std::string& sock = o.api_socks.front();
  auto prev = fetch_stats(sock);
  if (!prev) {
    std::fprintf(stderr, "tern: %s\n", prev.error().message().c_str());
    return kExitError;
  }
  KernelExitsHold hold(sock);
  if (o.kernel_exits) {
    hold.acquire(*prev);
    // The first interval starts with the accounting on (its since_ns), or says why it is not.
    if (auto again = fetch_stats(sock)) prev = std::move(again);
  }
  const bool tty = ::isatty(STDOUT_FILENO) == 1;
  const auto interval = std::chrono::duration<double>(o.interval_s);
  for (;;) {
    if (int s = hold.wait(interval)) {
      hold.release();  // the accounting off again, the signal unblocked: it ends tern stat now
      ::signal(s, SIG_DFL);
      ::raise(s);
      return 128 + s;
    }
    auto cur = fetch_stats(sock);
    if (!cur) {
      // The VM went away between refreshes: a normal end for a live view, an error for --once.
      std::fprintf(stderr, "tern: %s\n", cur.error().message().c_str());
      return o.once ? kExitError : 0;
    }
    if (o.kernel_exits) hold.keep(*cur);
    // A reply whose sections have other types than tern writes (not a tern on that socket, a
    // broken proxy) is named, not an internal error; the hold turns the accounting off.
    std::string screen;
    try {
      nlohmann::json rates = compute_rates(*prev, *cur, o.kernel_exits);
      if (o.kernel_exits && !hold.reason().empty()) {
        nlohmann::json& k = rates["kernel_exits"];
        if (!k.value("enabled", false) && !k.contains("error")) k["error"] = hold.reason();
      }
      if (o.json) {
        rates["stats"] = *cur;
        screen = rates.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
      } else {
        if (tty && !o.once) screen = "\033[H\033[2J";  // clear and home: a live screen
        screen += render_rates_table(rates, o.rows);
      }
    } catch (const nlohmann::json::exception& e) {
      std::fprintf(stderr, "tern stat: GET /tern/stats: a reply tern stat cannot read (%s)\n",
                   e.what());
      return kExitError;
    }
    std::fputs(screen.c_str(), stdout);
    std::fflush(stdout);
    if (o.once) return 0;
    prev = std::move(cur);
  }
}

}  // namespace tern
