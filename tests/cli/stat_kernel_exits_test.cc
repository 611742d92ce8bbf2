// `tern stat --kernel-exits` (the binary) against an in-process API server and control loop with
// a fake Machine (no KVM, no BPF): it turns the VM's in-kernel accounting on through
// PUT /tern/kernel-exits and off again when it ends — after --once, and on SIGTERM/SIGINT/SIGHUP/
// SIGQUIT/SIGPIPE (then it dies of that signal); it takes the accounting over when it goes off
// underneath, and a "kernel_exits" of the wrong shape counts as off; when the accounting cannot
// start, the screen has one line with the reason and the rest of tern stat is unchanged; without
// --kernel-exits the section is absent.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "api/api_server.h"
#include "base/clock.h"
#include "stats/stats_test_snapshot.h"
#include "tests/cli/spawn_tern.h"
#include "vmm/control_loop.h"
#include "vmm/testing/stub_machine.h"

extern char** environ;

namespace tern {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

class KernelExitsMachine : public testing::StubMachine {
 public:
  class Stats : public StatsSource {
   public:
    explicit Stats(KernelExitsMachine& m) : m_(m) {}
    Json stats_json() const override {
      std::lock_guard l(m_.mu);
      const uint64_t k = ++m_.reads;
      m_.changed.notify_all();
      Json j = testing::stats_snapshot(monotonic_ns(), k);
      for (const auto& [key, value] : m_.broken.items()) j[key] = value;  // another server's
      if (!m_.hostile.is_discarded() && !m_.on) {
        j["kernel_exits"] = m_.hostile;  // a reply of another (or broken) server
      } else if (m_.on) {
        j["kernel_exits"] = {
            {"enabled", true},
            {"method", "ebpf"},
            {"since_ns", m_.since_ns},
            {"total", 100 * k},
            {"kvm_exits", 100 * k + 1},
            {"kvm_exits_edge", 1},
            {"kvm_exits_start_edge", 0},
            {"difference", -1},
            {"vcpus", 1},
            {"userspace_exits", 10 * k},
            {"reasons",
             {{{"isa", "svm"},
               {"code", 1024},
               {"reason", "npf"},
               {"count", 100 * k},
               {"time_ns", 1000 * k}}}},
            {"msrs",
             {{{"msr", "0x80b"}, {"name", "X2APIC_EOI"}, {"access", "write"}, {"count", 7 * k}}}},
            {"pio", Json::array()},
            {"pio_in_kernel", Json::array()},
            {"npf", Json::array()},
            {"injected_irqs", Json::array()},
            {"dropped", 0}};
      } else if (!m_.error.empty()) {
        j["kernel_exits"] = {{"enabled", false}, {"error", m_.error}};
      } else {
        j["kernel_exits"] = {{"enabled", false}};
      }
      return j;
    }
    std::string metrics_text() const override { return ""; }

   private:
    KernelExitsMachine& m_;
  };
  const StatsSource& stats() const override { return stats_; }
  Result<void> set_kernel_exits(bool enabled) override {
    std::lock_guard l(mu);
    calls.push_back(enabled);
    changed.notify_all();
    if (enabled && !fail_reason.empty()) {
      error = "in-kernel exit accounting: " + fail_reason;
      return fail("in-kernel exit accounting", fail_reason);
    }
    error.clear();
    on = enabled;
    since_ns = monotonic_ns();
    return {};
  }
  /// Blocks until set_kernel_exits() has been called `n` times.
  void wait_calls(size_t n) {
    std::unique_lock l(mu);
    changed.wait(l, [&] { return calls.size() >= n; });
  }

  mutable std::mutex mu;
  std::condition_variable changed;
  std::vector<bool> calls;
  bool on = false;
  uint64_t since_ns = 0;
  mutable uint64_t reads = 0;
  std::string fail_reason, error;
  Json hostile = Json(Json::value_t::discarded);  // while off: "kernel_exits" is this instead
  Json broken = Json::object();                   // these top-level fields replace tern's
  Stats stats_{*this};
};

class StatKernelExits : public ::testing::Test {
 protected:
  void start(std::string fail_reason = {}) {
    sock_ = (fs::temp_directory_path() / ("tern-stat-kx-" + std::to_string(::getpid()) + ".sock"))
                .string();
    auto loop = ControlLoop::create(
        [this,
         fail_reason](const VmConfig&) -> tl::expected<std::unique_ptr<Machine>, StartFailure> {
          auto m = std::make_unique<KernelExitsMachine>();
          m->fail_reason = fail_reason;
          machine_ = m.get();
          return m;
        },
        events_);
    ASSERT_TRUE(loop);
    loop_ = std::move(*loop);
    VmResources r;
    r.boot = BootSource{};
    r.boot->kernel_image_path = "/proc/self/exe";
    loop_->configure(r);
    ASSERT_TRUE(loop_->start());
    CommandQueue* q = &loop_->queue();
    auto server = ApiServer::start(
        sock_,
        [q](ApiRequest req, std::function<void(ApiResponse)> reply) {
          q->push(cmd::Api{std::move(req), std::move(reply)});
        },
        events_);
    ASSERT_TRUE(server) << server.error().message();
    server_ = std::move(*server);
    control_ = std::thread([this] { loop_->run(); });
  }
  void TearDown() override {
    if (control_.joinable()) {
      loop_->queue().push(cmd::Signal{SIGTERM});
      control_.join();
    }
    if (server_) server_->shutdown();
    fs::remove(out_path());
  }
  std::string out_path() const {
    return (fs::temp_directory_path() / ("tern-stat-kx-" + std::to_string(::getpid()) + ".out"))
        .string();
  }
  /// Starts `tern stat --api-sock SOCK args...`, stdout and stderr to out_path().
  pid_t spawn(std::vector<std::string> args, int stdout_fd = -1) {
    args.insert(args.begin(), {"stat", "--api-sock", sock_});
    return spawn_tern(std::move(args), stdout_fd);
  }
  /// Starts `tern args...` (stdout as spawn()).
  pid_t spawn_tern(std::vector<std::string> args, int stdout_fd = -1) {
    return testing::spawn_tern(std::move(args), out_path(), stdout_fd);
  }
  int wait(pid_t pid) {
    int ws = 0;
    ::waitpid(pid, &ws, 0);
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
  }
  std::string output() const {
    std::ifstream in(out_path());
    return {std::istreambuf_iterator<char>(in), {}};
  }
  std::vector<bool> calls() {
    std::lock_guard l(machine_->mu);
    return machine_->calls;
  }

  std::string sock_;
  EventLog events_;
  KernelExitsMachine* machine_ = nullptr;
  std::unique_ptr<ControlLoop> loop_;
  std::unique_ptr<ApiServer> server_;
  std::thread control_;
};

// tern ctl's verbs for it: the same PUT /tern/kernel-exits an operator would send by hand.
TEST_F(StatKernelExits, CtlVerbsTurnItOnAndOff) {
  start();
  EXPECT_EQ(wait(spawn_tern({"ctl", "--api-sock", sock_, "kernel-exits-on"})), 0) << output();
  machine_->wait_calls(1);
  EXPECT_EQ(wait(spawn_tern({"ctl", "--api-sock", sock_, "kernel-exits-off"})), 0) << output();
  machine_->wait_calls(2);
  EXPECT_EQ(calls(), (std::vector<bool>{true, false}));
}

// When it cannot start, tern ctl says why (the API's 400 fault_message) and fails; the request
// is named once, not again from the fault message.
TEST_F(StatKernelExits, CtlVerbSaysWhyItCannotStart) {
  start("needs CAP_BPF and CAP_PERFMON (or root)");
  EXPECT_NE(wait(spawn_tern({"ctl", "--api-sock", sock_, "kernel-exits-on"})), 0);
  EXPECT_NE(output().find("tern ctl: PUT /tern/kernel-exits: 400: in-kernel exit accounting: "
                          "needs CAP_BPF and CAP_PERFMON (or root)"),
            std::string::npos)
      << output();
}

TEST_F(StatKernelExits, OnceTurnsItOnAndOffAndShowsTheSection) {
  start();
  pid_t pid = spawn({"--kernel-exits", "--once", "--interval", "0.05"});
  ASSERT_EQ(wait(pid), 0) << output();
  EXPECT_EQ(calls(), (std::vector<bool>{true, false}));
  std::string out = output();
  for (const char* want :
       {"exits by reason (all vCPUs)", "in-kernel exits by reason (all vCPUs)", "npf", "KVM exits",
        "(difference -1, bound ±2: exits between the two "
        "samples + 1 in flight per vCPU)",
        "reached userspace:", "0x80b X2APIC_EOI write"})
    EXPECT_NE(out.find(want), std::string::npos) << "want '" << want << "' in:\n" << out;
}

TEST_F(StatKernelExits, JsonCarriesTheSection) {
  start();
  pid_t pid = spawn({"--kernel-exits", "--once", "--json", "--interval", "0.05"});
  ASSERT_EQ(wait(pid), 0) << output();
  Json j = Json::parse(output(), nullptr, false);
  ASSERT_TRUE(j.is_object()) << output();
  EXPECT_EQ(j["kernel_exits"]["enabled"], true);
  EXPECT_TRUE(j["kernel_exits"]["rates"]["reasons"].contains("npf")) << j["kernel_exits"].dump();
  EXPECT_EQ(j["kernel_exits"]["within_bound"], true);
}

TEST_F(StatKernelExits, SigtermTurnsItOffFirst) {
  start();
  pid_t pid = spawn({"--kernel-exits", "--interval", "3600"});
  machine_->wait_calls(1);  // on
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  EXPECT_EQ(wait(pid), 128 + SIGTERM) << output();
  EXPECT_EQ(calls(), (std::vector<bool>{true, false}));
}

TEST_F(StatKernelExits, SigintTurnsItOffFirst) {
  start();
  pid_t pid = spawn({"--kernel-exits", "--interval", "3600"});
  machine_->wait_calls(1);
  ASSERT_EQ(::kill(pid, SIGINT), 0);
  EXPECT_EQ(wait(pid), 128 + SIGINT) << output();
  EXPECT_EQ(calls(), (std::vector<bool>{true, false}));
}

// Already on (e.g. tern run --kernel-exits): tern stat leaves it on.
TEST_F(StatKernelExits, LeavesItOnWhenItWasOn) {
  start();
  ASSERT_TRUE(machine_->set_kernel_exits(true));
  pid_t pid = spawn({"--kernel-exits", "--once", "--interval", "0.05"});
  ASSERT_EQ(wait(pid), 0) << output();
  EXPECT_EQ(calls(), (std::vector<bool>{true}));
  EXPECT_NE(output().find("in-kernel exits by reason"), std::string::npos) << output();
}

// The capability-missing path: the reason on one line, the rest of tern stat unchanged.
TEST_F(StatKernelExits, CannotStartPrintsTheReasonAndTheRest) {
  start("bpf(BPF_PROG_LOAD): needs CAP_BPF and CAP_PERFMON (or root): Operation not permitted");
  pid_t pid = spawn({"--kernel-exits", "--once", "--interval", "0.05"});
  ASSERT_EQ(wait(pid), 0) << output();
  EXPECT_EQ(calls(), (std::vector<bool>{true}));  // nothing to turn off
  std::string out = output();
  EXPECT_NE(out.find("\nin-kernel exits: unavailable: in-kernel exit accounting: "
                     "bpf(BPF_PROG_LOAD): needs CAP_BPF and CAP_PERFMON (or root): Operation not "
                     "permitted\n"),
            std::string::npos)
      << out;
  for (const char* want : {"exits by reason (all vCPUs)", "PIO/MMIO accesses by device",
                           "device queues", "host CPU per tern thread"})
    EXPECT_NE(out.find(want), std::string::npos) << "want '" << want << "' in:\n" << out;
}

// A closed terminal (SIGHUP) and Ctrl-\\ (SIGQUIT) end tern stat like SIGTERM: the accounting
// is turned off first. They used to kill it with the accounting left on in the VM.
TEST_F(StatKernelExits, SighupTurnsItOffFirst) {
  start();
  pid_t pid = spawn({"--kernel-exits", "--interval", "3600"});
  machine_->wait_calls(1);
  ASSERT_EQ(::kill(pid, SIGHUP), 0);
  EXPECT_EQ(wait(pid), 128 + SIGHUP) << output();
  EXPECT_EQ(calls(), (std::vector<bool>{true, false}));
}

TEST_F(StatKernelExits, SigquitTurnsItOffFirst) {
  start();
  pid_t pid = spawn({"--kernel-exits", "--interval", "3600"});
  machine_->wait_calls(1);
  ASSERT_EQ(::kill(pid, SIGQUIT), 0);
  EXPECT_EQ(wait(pid), 128 + SIGQUIT) << output();
  EXPECT_EQ(calls(), (std::vector<bool>{true, false}));
}

// Started ignoring SIGHUP (nohup tern stat ...): a SIGHUP is still ignored (blocking it with the
// others would queue it and end tern stat); SIGTERM ends it, the accounting off first.
TEST_F(StatKernelExits, IgnoredSighupStaysIgnored) {
  start();
  struct sigaction ign = {};
  struct sigaction old = {};
  ign.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGHUP, &ign, &old), 0);  // inherited through posix_spawn
  pid_t pid = spawn({"--kernel-exits", "--interval", "0.05"});
  ASSERT_EQ(::sigaction(SIGHUP, &old, nullptr), 0);
  machine_->wait_calls(1);
  // Its end, whenever it comes, wakes the wait below too.
  int status = -1;
  bool exited = false;
  std::thread reaper([&] {
    int s = wait(pid);
    std::lock_guard l(machine_->mu);
    status = s;
    exited = true;
    machine_->changed.notify_all();
  });
  ASSERT_EQ(::kill(pid, SIGHUP), 0);
  {  // two more refreshes, or its end
    std::unique_lock l(machine_->mu);
    const uint64_t seen = machine_->reads;
    machine_->changed.wait(l, [&] { return exited || machine_->reads >= seen + 2; });
    EXPECT_FALSE(exited) << "ended by an ignored SIGHUP: " << status;
  }
  bool alive;
  {
    std::lock_guard l(machine_->mu);
    alive = !exited;
  }
  if (alive) {
    EXPECT_EQ(::kill(pid, SIGTERM), 0);
  }
  reaper.join();
  EXPECT_EQ(status, 128 + SIGTERM) << output();
  EXPECT_EQ(calls(), (std::vector<bool>{true, false}));
}

// `tern stat --kernel-exits | head -1`: the reader goes away, the next write raises SIGPIPE. It
// used to kill tern stat with the accounting left on; now it is turned off, then tern stat dies
// of SIGPIPE as a pipeline stage should.
TEST_F(StatKernelExits, ClosedStdoutPipeTurnsItOffFirst) {
  start();
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  ::close(p[0]);  // no reader: the first refresh's write fails
  pid_t pid = spawn({"--kernel-exits", "--interval", "0.05"}, p[1]);
  ::close(p[1]);
  EXPECT_EQ(wait(pid), 128 + SIGPIPE) << output();
  EXPECT_EQ(calls(), (std::vector<bool>{true, false}));
}

// A reply whose "kernel_exits" is not what tern writes (another server, a broken proxy): tern stat
// treats it as off, turns the accounting on and shows the section; no "internal error" (a
// nlohmann type_error used to end it).
class StatKernelExitsHostile : public StatKernelExits, public ::testing::WithParamInterface<int> {};

const Json& hostile_kernel_exits(int i) {
  static const std::vector<Json> kBad{Json(5), Json("on"), Json{{"enabled", "yes"}},
                                      Json{{"enabled", 1}}, Json::array()};
  return kBad.at(static_cast<size_t>(i));
}

TEST_P(StatKernelExitsHostile, IsTreatedAsOff) {
  const Json& bad = hostile_kernel_exits(GetParam());
  start();
  machine_->hostile = bad;
  pid_t pid = spawn({"--kernel-exits", "--once", "--interval", "0.05"});
  EXPECT_EQ(wait(pid), 0) << bad.dump() << "\n" << output();
  EXPECT_EQ(calls(), (std::vector<bool>{true, false})) << bad.dump();
  EXPECT_EQ(output().find("internal error"), std::string::npos) << output();
  EXPECT_NE(output().find("in-kernel exits by reason"), std::string::npos) << output();
}

INSTANTIATE_TEST_SUITE_P(Replies, StatKernelExitsHostile, ::testing::Range(0, 5));

// A reply nested 100 000 levels deep (no tern sends one) is refused by name before anything copies
// or prints it (both recurse per level: the stack overflowed), with --json too.
TEST_F(StatKernelExits, ADeeplyNestedReplyIsRefused) {
  sock_ = (fs::temp_directory_path() / ("tern-stat-deep-" + std::to_string(::getpid()) + ".sock"))
              .string();
  ::unlink(sock_.c_str());
  UniqueFd listener(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::strncpy(sa.sun_path, sock_.c_str(), sizeof sa.sun_path - 1);
  ASSERT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  ASSERT_EQ(::listen(listener.get(), 4), 0);
  const std::string body =
      R"({"timestamp_ns":1,"x":)" + std::string(100'000, '[') + std::string(100'000, ']') + "}";
  std::thread server([&] {  // one reply: tern stat stops after the first
    UniqueFd c(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    char buf[4096];
    [[maybe_unused]] ssize_t n = ::recv(c.get(), buf, sizeof buf, 0);
    std::string reply = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
                        std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
    for (std::string_view rest = reply; !rest.empty();) {
      ssize_t w = ::send(c.get(), rest.data(), rest.size(), MSG_NOSIGNAL);
      if (w <= 0) break;
      rest.remove_prefix(static_cast<size_t>(w));
    }
  });
  EXPECT_EQ(wait(spawn({"--once", "--json", "--interval", "0.05"})), 1) << output();
  server.join();
  ::unlink(sock_.c_str());
  EXPECT_NE(output().find("the reply nests deeper than 32 levels"), std::string::npos) << output();
}

// A GET /tern/stats reply whose other sections have the wrong types (not a tern on that socket):
// one line naming the request and what was wrong, status 1, and the accounting it turned on is
// off again; no "internal error".
TEST_F(StatKernelExits, AReplyOfTheWrongShapeIsNamedNotAnInternalError) {
  start();
  machine_->broken = Json{{"kvm", 5}, {"exits", "many"}};
  pid_t pid = spawn({"--kernel-exits", "--once", "--interval", "0.05"});
  EXPECT_EQ(wait(pid), 1) << output();
  EXPECT_EQ(output().find("internal error"), std::string::npos) << output();
  EXPECT_NE(output().find("tern stat: GET /tern/stats: a reply tern stat cannot read"),
            std::string::npos)
      << output();
  EXPECT_EQ(calls(), (std::vector<bool>{true, false}));
}

// Two tern stat --kernel-exits on one VM: the first turned it on; when it ends it turns it off.
// The second, which found it on, takes over (turns it on again and off when it ends) instead of
// showing "off" for the rest of its run.
TEST_F(StatKernelExits, TakesOverWhenTurnedOffUnderneath) {
  start();
  ASSERT_TRUE(machine_->set_kernel_exits(true));  // as the first tern stat did
  pid_t pid = spawn({"--kernel-exits", "--interval", "0.05"});
  // Turned off underneath (the first tern stat ended) once the second has seen it on.
  {
    std::unique_lock l(machine_->mu);
    machine_->changed.wait(l, [&] { return machine_->reads >= 3; });
  }
  ASSERT_TRUE(machine_->set_kernel_exits(false));
  machine_->wait_calls(3);  // the second tern stat turns it on again
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  EXPECT_EQ(wait(pid), 128 + SIGTERM) << output();
  EXPECT_EQ(calls(), (std::vector<bool>{true, false, true, false}));
}

TEST_F(StatKernelExits, OffUnlessAsked) {
  start();
  pid_t pid = spawn({"--once", "--interval", "0.05"});
  ASSERT_EQ(wait(pid), 0) << output();
  EXPECT_TRUE(calls().empty());
  EXPECT_EQ(output().find("in-kernel exits"), std::string::npos) << output();
}

}  // namespace
}  // namespace tern
