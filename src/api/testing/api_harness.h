// Test helpers (unit tests only): tern's API stack in-process — the ControlLoop on a "control"
// thread and the ApiServer on its own, over a real Unix socket, with a FakeMachine (no KVM) —
// and raw-socket helpers for requests a well-behaved client would never send.
#pragma once

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "api/api_client.h"
#include "api/api_server.h"
#include "vmm/control_loop.h"
#include "vmm/testing/stub_machine.h"

namespace tern::testing {

/// A Machine that only records what the control loop asks of it. SendCtrlAltDel behaves like a
/// guest whose init reboots.
class FakeMachine : public StubMachine {
 public:
  class NoStats : public StatsSource {
   public:
    nlohmann::json stats_json() const override { return {{"fake", true}}; }
    std::string metrics_text() const override {
      if (throw_in_metrics) throw std::runtime_error("metrics exploded");
      return "tern_fake 1\n";
    }
    std::atomic<bool> throw_in_metrics{false};  ///< A handler bug: GET /tern/metrics throws.
  };
  void start() override { started = true; }
  void pause() override { ++pauses; }
  void resume() override { ++resumes; }
  bool send_ctrl_alt_del() override {
    latch.post(StopEvent{StopKind::kReboot, 0, 0, "i8042 reset (0xFE)"});
    return true;
  }
  const StatsSource& stats() const override { return stats_; }
  Result<SnapshotReport> save_snapshot(const SnapshotCreateSpec& spec, const SaveProgress& progress,
                                       const std::atomic<bool>&) override {
    saved_paths = spec.snapshot_path + " " + spec.mem_file_path;
    progress(1 << 20, 2 << 20);
    if (during_save) during_save();
    progress(2 << 20, 2 << 20);
    if (spec.snapshot_path.ends_with("/fail.state")) return fail("write", "disk full");
    return SnapshotReport{2 << 20, 1 << 20, 100, 0.5};
  }

  std::string saved_paths;
  /// Called halfway through save_snapshot (on the control loop's saver thread), if set.
  std::function<void()> during_save;
  std::atomic<bool> started{false};
  std::atomic<int> pauses{0}, resumes{0};
  NoStats stats_;
};

/// tern's API stack in-process: ControlLoop on a "control" thread, ApiServer on its own.
class ApiHarness {
 public:
  /// `before_run` configures the loop as `tern run` does (before the control thread starts).
  explicit ApiHarness(ApiServerOptions opts = {},
                      const std::function<void(ControlLoop&)>& before_run = {}) {
    sock = "/tmp/tern-api-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) +
           ".sock";
    auto loop = ControlLoop::create(
        [this](const VmConfig& config) -> tl::expected<std::unique_ptr<Machine>, StartFailure> {
          started_config = config;
          auto m = std::make_unique<FakeMachine>();
          machine = m.get();
          return m;
        },
        events);
    EXPECT_TRUE(loop);
    loop_ = std::move(*loop);
    CommandQueue* q = &loop_->queue();
    auto server = ApiServer::start(
        sock,
        [q](ApiRequest r, std::function<void(ApiResponse)> reply) {
          q->push(cmd::Api{std::move(r), std::move(reply)});
        },
        events, opts);
    EXPECT_TRUE(server) << server.error().message();
    server_ = std::move(*server);
    if (before_run) before_run(*loop_);
    control_ = std::thread([this] { status_ = loop_->run(); });
  }
  ~ApiHarness() {
    if (control_.joinable()) {
      loop_->queue().push(cmd::Signal{SIGTERM});
      control_.join();
    }
    server_->shutdown();
    loop_.reset();
    server_.reset();
  }
  /// What tern does after the control loop ended: flush event streams, close the socket.
  void shutdown_server() { server_->shutdown(std::chrono::seconds(1)); }
  /// Waits for the control loop to end and returns its exit status.
  int wait_exit() {
    control_.join();
    return status_;
  }
  HttpReply call(std::string_view method, std::string_view target, std::string_view body = {}) {
    auto r = api_request(sock, method, target, body);
    EXPECT_TRUE(r) << r.error().message();
    return r ? *r : HttpReply{};
  }
  void configure_and_start() {
    ASSERT_EQ(call("PUT", "/boot-source", R"({"kernel_image_path": "/proc/self/exe"})").status,
              204);
    ASSERT_EQ(call("PUT", "/actions", R"({"action_type": "InstanceStart"})").status, 204);
  }

  std::string sock;
  EventLog events;
  VmConfig started_config;  ///< What the factory was asked to build (drives applied).
  FakeMachine* machine = nullptr;

 private:
  static inline int counter = 0;
  std::unique_ptr<ControlLoop> loop_;
  std::unique_ptr<ApiServer> server_;
  std::thread control_;
  int status_ = -1;
};

inline std::string fault_of(const HttpReply& r) {
  auto j = nlohmann::json::parse(r.body, nullptr, false);
  return j.is_object() && j.contains("fault_message") ? j["fault_message"].get<std::string>() : "";
}

/// Connects, sends `bytes` raw, and reads until the server closes (bounded by a 10 s receive
/// timeout so a broken server fails the test instead of hanging it).
inline UniqueFd raw_connect(const std::string& path) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::strncpy(sa.sun_path, path.c_str(), sizeof sa.sun_path - 1);
  EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  timeval tv{10, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}
inline void send_all(const UniqueFd& fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::send(fd.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return;  // the server may close early (e.g. 413): that is the point
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}
inline std::string read_to_close(const UniqueFd& fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
    if (n <= 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}
inline std::string raw_exchange(const std::string& path, std::string_view bytes) {
  UniqueFd fd = raw_connect(path);
  send_all(fd, bytes);
  return read_to_close(fd);
}

}  // namespace tern::testing
