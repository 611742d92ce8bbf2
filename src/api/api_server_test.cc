// Unit tests: the API server and the control loop together, over a real Unix socket, with a fake
// Machine (no KVM). Covers the robustness list: malformed HTTP, bad JSON, huge bodies, stalled and
// concurrent clients, wrong-state requests, events, power-off.
#include "api/api_server.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <atomic>
#include <cstdlib>
#include <future>
#include <thread>

#include "api/api_client.h"
#include "vmm/control_loop.h"
#include "vmm/testing/stub_machine.h"

namespace tern {
namespace {

/// A Machine that only records what the control loop asks of it. SendCtrlAltDel behaves like a
/// guest whose init reboots.
class FakeMachine : public testing::StubMachine {
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
    progress(2 << 20, 2 << 20);
    if (spec.snapshot_path.ends_with("/fail.state")) return fail("write", "disk full");
    return SnapshotReport{2 << 20, 1 << 20, 100, 0.5};
  }

  std::string saved_paths;
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

std::string fault_of(const HttpReply& r) {
  auto j = nlohmann::json::parse(r.body, nullptr, false);
  return j.is_object() && j.contains("fault_message") ? j["fault_message"].get<std::string>() : "";
}

/// Connects, sends `bytes` raw, and reads until the server closes (bounded by a 10 s receive
/// timeout so a broken server fails the test instead of hanging it).
UniqueFd raw_connect(const std::string& path) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::strncpy(sa.sun_path, path.c_str(), sizeof sa.sun_path - 1);
  EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  timeval tv{10, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}
void send_all(const UniqueFd& fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::send(fd.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return;  // the server may close early (e.g. 413): that is the point
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}
std::string read_to_close(const UniqueFd& fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
    if (n <= 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}
std::string raw_exchange(const std::string& path, std::string_view bytes) {
  UniqueFd fd = raw_connect(path);
  send_all(fd, bytes);
  return read_to_close(fd);
}

TEST(ApiServer, FirecrackerFlowPauseResumeCtrlAltDel) {
  ApiHarness h;
  EXPECT_EQ(
      h.call("GET", "/").body,
      R"({"app_name":"tern","id":"anonymous-instance","state":"Not started","vmm_version":")" TERN_VERSION
      "\"}");
  EXPECT_EQ(h.call("PUT", "/machine-config", R"({"vcpu_count": 2, "mem_size_mib": 1024})").status,
            204);
  auto mc = nlohmann::json::parse(h.call("GET", "/machine-config").body);
  EXPECT_EQ(mc["vcpu_count"], 2);
  EXPECT_EQ(mc["mem_size_mib"], 1024);
  h.configure_and_start();
  ASSERT_NE(h.machine, nullptr);
  EXPECT_TRUE(h.machine->started);
  EXPECT_EQ(nlohmann::json::parse(h.call("GET", "/").body)["state"], "Running");
  EXPECT_EQ(h.call("PATCH", "/vm", R"({"state": "Paused"})").status, 204);
  EXPECT_EQ(nlohmann::json::parse(h.call("GET", "/").body)["state"], "Paused");
  EXPECT_EQ(h.call("PATCH", "/vm", R"({"state": "Resumed"})").status, 204);
  EXPECT_EQ(h.machine->pauses, 1);
  EXPECT_EQ(h.machine->resumes, 1);
  auto cfg = nlohmann::json::parse(h.call("GET", "/vm/config").body);
  EXPECT_EQ(cfg["boot-source"]["kernel_image_path"], "/proc/self/exe");
  EXPECT_EQ(cfg["machine-config"]["vcpu_count"], 2);
  auto stats = nlohmann::json::parse(h.call("GET", "/tern/stats").body);
  EXPECT_EQ(stats["fake"], true);
  EXPECT_EQ(stats["snapshot"]["phase"], "idle");
  auto metrics = h.call("GET", "/tern/metrics");
  EXPECT_EQ(metrics.body, "tern_fake 1\n");
  EXPECT_EQ(metrics.content_type, "text/plain; version=0.0.4");
  EXPECT_EQ(h.call("PUT", "/actions", R"({"action_type": "FlushMetrics"})").status, 204);
  EXPECT_EQ(h.call("PUT", "/actions", R"({"action_type": "SendCtrlAltDel"})").status, 204);
  EXPECT_EQ(h.wait_exit(), 3);  // the fake guest rebooted: README's status 3
  auto lines = h.events.lines();
  ASSERT_GE(lines.size(), 6u);
  EXPECT_NE(lines[lines.size() - 2].find(R"("reason":"reboot")"), std::string::npos);
  EXPECT_NE(lines.back().find(R"("state":"Stopped")"), std::string::npos);
}

TEST(ApiServer, SnapshotCreateNeedsPausedVmReportsProgressAndFailures) {
  ApiHarness h;
  const std::string body =
      R"({"snapshot_type": "Full", "snapshot_path": "/tmp/a.state", "mem_file_path": "/tmp/a.mem"})";
  EXPECT_EQ(fault_of(h.call("PUT", "/snapshot/create", body)),
            R"(snapshot/create: the VM is Not started; only a paused VM can be saved)");
  h.configure_and_start();
  EXPECT_EQ(h.call("PUT", "/snapshot/create", body).status, 400);  // running
  EXPECT_EQ(h.call("PATCH", "/vm", R"({"state": "Paused"})").status, 204);
  EXPECT_EQ(h.call("PUT", "/snapshot/create", body).status, 204);
  EXPECT_EQ(h.machine->saved_paths, "/tmp/a.state /tmp/a.mem");
  auto snap = nlohmann::json::parse(h.call("GET", "/tern/stats").body)["snapshot"];
  EXPECT_EQ(snap["phase"], "done");
  EXPECT_EQ(snap["total_bytes"], 2 << 20);
  EXPECT_EQ(snap["written_bytes"], 1 << 20);
  // A failed save answers 400 with the reason; the VM stays paused and can resume.
  auto failed = h.call("PUT", "/snapshot/create",
                       R"({"snapshot_path": "/tmp/fail.state", "mem_file_path": "/tmp/b.mem"})");
  EXPECT_EQ(fault_of(failed), "snapshot/create: write: disk full");
  EXPECT_EQ(nlohmann::json::parse(h.call("GET", "/tern/stats").body)["snapshot"]["phase"],
            "failed");
  EXPECT_EQ(nlohmann::json::parse(h.call("GET", "/").body)["state"], "Paused");
  // Loading a snapshot needs a fresh tern.
  EXPECT_NE(
      fault_of(
          h.call(
              "PUT", "/snapshot/load",
              R"({"snapshot_path": "/proc/self/exe", "mem_backend": {"backend_type": "File", "backend_path": "/proc/self/exe"}})"))
          .find("already has a VM"),
      std::string::npos);
  EXPECT_EQ(h.call("PATCH", "/vm", R"({"state": "Resumed"})").status, 204);
  EXPECT_EQ(h.call("PUT", "/tern/power-off").status, 204);
  EXPECT_EQ(h.wait_exit(), 0);
}

TEST(ApiServer, SnapshotLoadRefusedAfterPreBootConfiguration) {
  ApiHarness h;
  EXPECT_EQ(h.call("PUT", "/machine-config", R"({"vcpu_count": 1, "mem_size_mib": 128})").status,
            204);
  EXPECT_NE(
      fault_of(
          h.call(
              "PUT", "/snapshot/load",
              R"({"snapshot_path": "/proc/self/exe", "mem_backend": {"backend_type": "File", "backend_path": "/proc/self/exe"}})"))
          .find("not after pre-boot configuration"),
      std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(h.call("GET", "/").body)["state"], "Not started");
}

TEST(ApiServer, WrongStateErrorsNameTheState) {
  ApiHarness h;
  EXPECT_EQ(fault_of(h.call("PATCH", "/vm", R"({"state": "Paused"})")),
            "cannot pause: the VM is Not started");
  EXPECT_EQ(fault_of(h.call("PUT", "/actions", R"({"action_type": "SendCtrlAltDel"})")),
            "SendCtrlAltDel: the VM is Not started");
  EXPECT_EQ(fault_of(h.call("PUT", "/actions", R"({"action_type": "InstanceStart"})")),
            "InstanceStart: no boot source (PUT /boot-source first)");
  h.configure_and_start();
  auto twice = h.call("PUT", "/actions", R"({"action_type": "InstanceStart"})");
  EXPECT_EQ(twice.status, 400);
  EXPECT_EQ(fault_of(twice), "InstanceStart: the VM is Running");
  EXPECT_EQ(fault_of(h.call("PATCH", "/vm", R"({"state": "Resumed"})")),
            "cannot resume: the VM is Running");
  EXPECT_EQ(fault_of(h.call("PUT", "/machine-config", R"({"vcpu_count": 1, "mem_size_mib": 64})")),
            "PUT /machine-config is pre-boot only: the VM is Running");
  EXPECT_EQ(fault_of(h.call("PUT", "/boot-source", R"({"kernel_image_path": "/proc/self/exe"})")),
            "PUT /boot-source is pre-boot only: the VM is Running");
  EXPECT_EQ(h.call("PATCH", "/vm", R"({"state": "Paused"})").status, 204);
  EXPECT_EQ(fault_of(h.call("PATCH", "/vm", R"({"state": "Paused"})")),
            "cannot pause: the VM is Paused");
  EXPECT_EQ(h.machine->pauses, 1);
}

TEST(ApiServer, DrivesBecomeDisksRootFirst) {
  ApiHarness h;
  EXPECT_EQ(
      h.call(
           "PUT", "/drives/scratch",
           R"({"drive_id": "scratch", "path_on_host": "/proc/self/exe", "is_root_device": false, "cache_type": "Writeback", "io_engine": "Async"})")
          .status,
      204);
  EXPECT_EQ(
      h.call(
           "PUT", "/drives/rootfs",
           R"({"drive_id": "rootfs", "path_on_host": "/proc/self/exe", "is_root_device": true, "is_read_only": true})")
          .status,
      204);
  EXPECT_EQ(
      fault_of(h.call(
          "PUT", "/drives/other",
          R"({"drive_id": "other", "path_on_host": "/proc/self/exe", "is_root_device": true})")),
      "is_root_device: drive \"rootfs\" is already the root device");
  auto cfg = nlohmann::json::parse(h.call("GET", "/vm/config").body);
  ASSERT_EQ(cfg["drives"].size(), 2u);
  EXPECT_EQ(cfg["drives"][0]["drive_id"], "scratch");
  ASSERT_EQ(h.call("PUT", "/boot-source",
                   R"({"kernel_image_path": "/proc/self/exe", "boot_args": "console=ttyS0"})")
                .status,
            204);
  ASSERT_EQ(h.call("PUT", "/actions", R"({"action_type": "InstanceStart"})").status, 204);
  ASSERT_EQ(h.started_config.devices.size(), 2u);
  EXPECT_TRUE(std::get<DiskSpec>(h.started_config.devices[0]).read_only);  // rootfs is /dev/vda
  EXPECT_EQ(std::get<DiskSpec>(h.started_config.devices[1]).cache, CacheMode::kWriteback);
  EXPECT_EQ(std::get<DiskSpec>(h.started_config.devices[1]).engine, IoEngineKind::kIoUring);
  EXPECT_EQ(h.started_config.cmdline, "console=ttyS0 root=/dev/vda ro");
}

// A vhost-user drive through the API: the root device (/dev/vda, root= as for an image), its
// socket reaches the VM's configuration, GET /vm/config shows it without the back-end's fields.
TEST(ApiServer, VhostUserDriveIsADisk) {
  ApiHarness h;
  EXPECT_EQ(
      h.call(
           "PUT", "/drives/scratch",
           R"({"drive_id": "scratch", "path_on_host": "/proc/self/exe", "is_root_device": false})")
          .status,
      204);
  EXPECT_EQ(
      h.call(
           "PUT", "/drives/rootfs",
           R"({"drive_id": "rootfs", "socket": "/tmp/vu.sock", "is_root_device": true, "queues": 2})")
          .status,
      204);
  EXPECT_EQ(
      fault_of(h.call(
          "PUT", "/drives/bad",
          R"({"drive_id": "bad", "socket": "/tmp/vu.sock", "is_root_device": false, "cache_type": "Unsafe"})")),
      "cache_type: not with socket: a vhost-user drive's cache_type belongs to the back-end "
      "(omit the field)");
  auto cfg = nlohmann::json::parse(h.call("GET", "/vm/config").body);
  ASSERT_EQ(cfg["drives"].size(), 2u);
  EXPECT_EQ(cfg["drives"][1], (nlohmann::json{{"drive_id", "rootfs"},
                                              {"is_root_device", true},
                                              {"socket", "/tmp/vu.sock"},
                                              {"queues", 2}}));
  ASSERT_EQ(h.call("PUT", "/boot-source",
                   R"({"kernel_image_path": "/proc/self/exe", "boot_args": "console=ttyS0"})")
                .status,
            204);
  ASSERT_EQ(h.call("PUT", "/actions", R"({"action_type": "InstanceStart"})").status, 204);
  ASSERT_EQ(h.started_config.devices.size(), 2u);
  const auto& root = std::get<DiskSpec>(h.started_config.devices[0]);
  EXPECT_EQ(root.vhost_user_socket, "/tmp/vu.sock");
  EXPECT_EQ(root.queues, 2);
  EXPECT_TRUE(root.path.empty());
  EXPECT_EQ(h.started_config.cmdline, "console=ttyS0 root=/dev/vda rw");
}

TEST(ApiServer, PowerOffEndsWithStatusZero) {
  ApiHarness h;
  EXPECT_EQ(fault_of(h.call("PUT", "/tern/power-off")), "power-off: the VM is Not started");
  h.configure_and_start();
  EXPECT_EQ(h.call("PATCH", "/vm", R"({"state": "Paused"})").status, 204);
  EXPECT_EQ(h.call("PUT", "/tern/power-off").status, 204);
  EXPECT_EQ(h.wait_exit(), 0);
}

// Issue #8 defect 4: a kernel path or command line from tern's command line may hold any bytes;
// GET /vm/config used to throw on them (nlohmann's dump) and the exception ended tern.
TEST(ApiServer, VmConfigWithNonUtf8PathsAnswersAndTheVmKeepsRunning) {
  const std::string latin1_path = "/tmp/k\xe9rnel";  // "kérnel" in Latin-1
  ApiHarness h({}, [&](ControlLoop& loop) {
    VmResources r;
    r.boot = BootSource{latin1_path, std::nullopt, "console=ttyS0 x=\xff"};
    DriveSpec d;
    d.drive_id = "rootfs";
    d.disk.path = "/tmp/d\xe9sk";
    r.drives = {d};
    loop.configure(r);
  });
  auto reply = h.call("GET", "/vm/config");
  ASSERT_EQ(reply.status, 200) << reply.body;
  auto cfg = nlohmann::json::parse(reply.body);  // valid UTF-8 JSON: the byte became U+FFFD
  EXPECT_EQ(cfg["boot-source"]["kernel_image_path"], "/tmp/k\xef\xbf\xbdrnel");
  EXPECT_EQ(cfg["boot-source"]["boot_args"], "console=ttyS0 x=\xef\xbf\xbd");
  EXPECT_EQ(cfg["drives"][0]["path_on_host"], "/tmp/d\xef\xbf\xbdsk");
  EXPECT_EQ(nlohmann::json::parse(h.call("GET", "/").body)["state"], "Not started");
}

// Issue #8 defect 4: any exception in a request handler is a 500 for that client, not the end of
// the VM.
TEST(ApiServer, ExceptionInAHandlerIsA500AndTheVmKeepsRunning) {
  ApiHarness h;
  h.configure_and_start();
  h.machine->stats_.throw_in_metrics = true;
  auto reply = h.call("GET", "/tern/metrics");
  EXPECT_EQ(reply.status, 500);
  EXPECT_EQ(fault_of(reply), "internal error: metrics exploded");
  EXPECT_EQ(nlohmann::json::parse(h.call("GET", "/").body)["state"], "Running");
  EXPECT_EQ(h.call("PATCH", "/vm", R"({"state": "Paused"})").status, 204);
  EXPECT_EQ(h.call("PUT", "/tern/power-off").status, 204);
  EXPECT_EQ(h.wait_exit(), 0);
}

TEST(ApiServer, MalformedHttp) {
  ApiServerOptions opts;
  opts.read_timeout = std::chrono::milliseconds(500);  // the lying request ends in a 408
  ApiHarness h(opts);
  EXPECT_EQ(raw_exchange(h.sock, "GET foo HTTP/1.1\r\nHost: x\r\n\r\n").rfind("HTTP/1.1 400", 0),
            0u);
  EXPECT_EQ(raw_exchange(h.sock, "GET /\r\n\r\n").rfind("HTTP/1.1 400", 0), 0u);  // no version
  EXPECT_EQ(raw_exchange(h.sock, "BLAH BLAH BLAH\r\n\r\n").rfind("HTTP/1.1 400", 0), 0u);
  // Content-Length shorter than the body: the rest is read as a (malformed) next request.
  std::string lying =
      "PUT /actions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n{\"action_type\": "
      "\"FlushMetrics\"}";
  std::string out = raw_exchange(h.sock, lying);
  EXPECT_EQ(out.rfind("HTTP/1.1 400", 0), 0u) << out;
  // A 10 MB body is refused from its Content-Length, before it is read.
  std::string big = "PUT /machine-config HTTP/1.1\r\nHost: x\r\nContent-Length: 10485760\r\n\r\n";
  UniqueFd fd = raw_connect(h.sock);
  send_all(fd, big);
  std::string reply = read_to_close(fd);
  EXPECT_EQ(reply.rfind("HTTP/1.1 413", 0), 0u) << reply;
  // An oversized request head.
  std::string huge_head = "GET / HTTP/1.1\r\nX-Junk: " + std::string(20000, 'a') + "\r\n\r\n";
  EXPECT_EQ(raw_exchange(h.sock, huge_head).rfind("HTTP/1.1 431", 0), 0u);
  // The server is still fine.
  EXPECT_EQ(h.call("GET", "/").status, 200);
}

// Chunk extensions and trailers count toward neither the head nor the body limit, and Beast
// buffers one whole before parsing it: a client streaming a chunk extension grew tern without
// bound (1.8 GiB in 4 s from 4 connections). The read buffer is capped now.
TEST(ApiServer, HugeChunkExtensionOrTrailerIsRefusedNotBuffered) {
  ApiHarness h;
  const std::string head =
      "PUT /actions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string body = R"({"action_type": "FlushMetrics"})";
  char size_hex[16];
  std::snprintf(size_hex, sizeof size_hex, "%zx", body.size());
  // A valid request but for a 4 MiB chunk extension: it used to be accepted (204).
  std::string ext =
      head + size_hex + ";x=" + std::string(4 << 20, 'a') + "\r\n" + body + "\r\n0\r\n\r\n";
  std::string out = raw_exchange(h.sock, ext);
  EXPECT_EQ(out.rfind("HTTP/1.1 400", 0), 0u) << out.substr(0, 200);
  EXPECT_NE(out.find("chunk header or trailer"), std::string::npos) << out.substr(0, 300);
  // A 4 MiB trailer field.
  std::string trailer =
      head + size_hex + "\r\n" + body + "\r\n0\r\nX-T: " + std::string(4 << 20, 'b') + "\r\n\r\n";
  out = raw_exchange(h.sock, trailer);
  EXPECT_TRUE(out.rfind("HTTP/1.1 400", 0) == 0 || out.rfind("HTTP/1.1 431", 0) == 0)
      << out.substr(0, 200);
  // Many small chunks are fine: the body is parsed out of the buffer as it comes.
  std::string chunks = head;
  for (char c : body) chunks += std::string("1\r\n") + c + "\r\n";
  chunks += "0\r\n\r\n";
  out = raw_exchange(h.sock, chunks);
  EXPECT_EQ(out.rfind("HTTP/1.1 204", 0), 0u) << out;
  EXPECT_EQ(h.call("GET", "/").status, 200);
}

TEST(ApiServer, BadJsonBodies) {
  ApiHarness h;
  EXPECT_NE(
      fault_of(h.call("PUT", "/machine-config", R"({"vcpu_count": 2, "mem_)")).find("JSON body"),
      std::string::npos);
  EXPECT_NE(fault_of(h.call("PUT", "/machine-config", std::string(10000, '[')))
                .find("nested deeper than 32"),
            std::string::npos);
  EXPECT_NE(
      fault_of(h.call("PUT", "/actions", "{\"action_type\": \"\xc3\x28\"}")).find("JSON body"),
      std::string::npos);
  EXPECT_EQ(fault_of(h.call("PUT", "/machine-config",
                            R"({"vcpu_count": 2, "mem_size_mib": 64, "cpus": 1})")),
            "cpus: unknown field");
  EXPECT_EQ(
      fault_of(h.call("PUT", "/machine-config", R"({"vcpu_count": true, "mem_size_mib": 64})")),
      "vcpu_count: expected an integer, got boolean");
  // Nothing was applied by the rejected requests.
  EXPECT_EQ(nlohmann::json::parse(h.call("GET", "/machine-config").body)["mem_size_mib"], 128);
}

TEST(ApiServer, StalledClientDoesNotBlockFiftyOthers) {
  ApiServerOptions opts;
  opts.read_timeout = std::chrono::milliseconds(500);
  ApiHarness h(opts);
  UniqueFd stalled = raw_connect(h.sock);
  send_all(stalled, "PUT /machine-config HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{\"vcpu");
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < 50; ++i) {
    clients.emplace_back([&, i] {
      for (int k = 0; k < 4; ++k) {
        auto r = api_request(h.sock, "GET", i % 2 ? "/" : "/machine-config");
        if (r && r->status == 200) ++ok;
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), 200);
  // The stalled client gets its answer once its time is up.
  std::string out = read_to_close(stalled);
  EXPECT_EQ(out.rfind("HTTP/1.1 408", 0), 0u) << out;
}

TEST(ApiServer, ConnectionLimit) {
  ApiServerOptions opts;
  opts.max_connections = 3;
  ApiHarness h(opts);
  std::vector<UniqueFd> idle;
  for (int i = 0; i < 3; ++i) {
    idle.push_back(raw_connect(h.sock));
    // A full round trip on each, so the server has certainly accepted it.
    send_all(idle.back(), "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    char buf[512];
    EXPECT_GT(::recv(idle.back().get(), buf, sizeof buf, 0), 0);
  }
  std::string out = raw_exchange(h.sock, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(out.rfind("HTTP/1.1 503", 0), 0u) << out;
  idle.clear();
}

/// GET / until it is not refused for want of a connection slot (bounded: ~10 s): waits for the
/// server to free a slot, without guessing how long that takes.
int status_once_a_slot_is_free(const std::string& sock) {
  int status = 0;
  for (int i = 0; i < 200; ++i) {
    auto r = api_request(sock, "GET", "/");
    status = r ? r->status : -1;
    if (status != 503 && status != -1) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return status;
}

/// Waits (poll(2), up to 10 s) until `fd` has something to read.
bool readable(const UniqueFd& fd) {
  pollfd p{fd.get(), POLLIN, 0};
  return ::poll(&p, 1, 10'000) == 1;
}

// A client that pipelines requests and never reads the answers (or is stopped) used to hold its
// connection for ever: the answer's write waited without a timeout, so 128 such clients locked
// everyone out of the API (tern snapshot, power-off) until they died.
TEST(ApiServer, ClientThatNeverTakesItsAnswersIsDisconnected) {
  ApiServerOptions opts;
  opts.max_connections = 1;
  opts.read_timeout = std::chrono::milliseconds(300);
  ApiHarness h(opts);
  UniqueFd stuck = raw_connect(h.sock);
  int small = 4096;
  ::setsockopt(stuck.get(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  // Pipeline until the server stops reading (its answers fill the socket): it is then blocked
  // writing an answer nobody takes.
  const std::string one = "GET /vm/config HTTP/1.1\r\nHost: x\r\n\r\n";
  std::string many;
  for (int i = 0; i < 64; ++i) many += one;
  size_t sent = 0;
  for (int spins = 0; spins < 200 && sent < (size_t{64} << 20); ++spins) {
    ssize_t n = ::send(stuck.get(), many.data(), many.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      spins = 0;
      continue;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_GT(sent, 0u);
  // After the write timeout the one connection slot is free again (before the fix: 503 for ever).
  EXPECT_EQ(status_once_a_slot_is_free(h.sock), 200);
}

// Over the connection limit, a client that sends its request once the server has answered 503
// used to fail writing it (EPIPE: the server had closed), so tern ctl reported "write request:
// Broken pipe" and never read the 503. Now the server lingers: the write succeeds, the 503 is read.
TEST(ApiServer, RefusedClientCanStillSendItsRequestAndReadThe503) {
  ApiServerOptions opts;
  opts.max_connections = 1;
  ApiHarness h(opts);
  UniqueFd held = raw_connect(h.sock);
  send_all(held, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  char buf[512];
  ASSERT_GT(::recv(held.get(), buf, sizeof buf, 0), 0);  // accepted: the one slot is taken
  for (int i = 0; i < 5; ++i) {
    UniqueFd fd = raw_connect(h.sock);
    ASSERT_TRUE(readable(fd));  // the 503 is written (the old server had closed by now)
    const std::string req =
        "PUT /actions HTTP/1.1\r\nHost: x\r\nContent-Length: 31\r\n\r\n"
        "{\"action_type\": \"FlushMetrics\"}";
    ssize_t n = ::send(fd.get(), req.data(), req.size(), MSG_NOSIGNAL);
    EXPECT_EQ(n, static_cast<ssize_t>(req.size())) << "send: " << std::strerror(errno);
    std::string out = read_to_close(fd);
    EXPECT_EQ(out.rfind("HTTP/1.1 503", 0), 0u) << out;
  }
  held.reset();
  EXPECT_EQ(status_once_a_slot_is_free(h.sock), 200);
}

/// Opens GET /tern/events on a raw socket and reads the response head (and what follows it).
std::string open_event_stream(const UniqueFd& fd) {
  send_all(fd, "GET /tern/events HTTP/1.1\r\nHost: x\r\n\r\n");
  std::string out;
  char buf[4096];
  while (out.find("\r\n\r\n") == std::string::npos) {
    ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// Issue #8 defect 5: 128 idle event streams used to take every connection slot, so control
// requests (tern snapshot) got 503. Streams have their own limit below the connection limit.
TEST(ApiServer, EventStreamsLeaveRoomForControlRequests) {
  const ApiServerOptions defaults;
  ApiHarness h;
  std::vector<UniqueFd> streams;
  int opened = 0, refused = 0;
  for (size_t i = 0; i < defaults.max_connections; ++i) {
    UniqueFd fd = raw_connect(h.sock);
    std::string head = open_event_stream(fd);
    if (head.rfind("HTTP/1.1 200", 0) == 0) {
      ++opened;
      streams.push_back(std::move(fd));
    } else if (head.rfind("HTTP/1.1 503", 0) == 0) {
      ++refused;
      std::string all = head + read_to_close(fd);
      EXPECT_NE(all.find("too many event streams (limit 32)"), std::string::npos) << all;
    }
  }
  EXPECT_EQ(opened, 32);
  EXPECT_EQ(refused, 96);
  // The streams are still open; control requests get through, on many connections at once.
  std::vector<UniqueFd> control;
  const size_t streams_limit = 32;  // README: "of which at most 32 GET /tern/events streams"
  for (size_t i = 0; i + 1 < defaults.max_connections - streams_limit; ++i) {
    control.push_back(raw_connect(h.sock));
    send_all(control.back(), "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    char buf[512];
    ssize_t n = ::recv(control.back().get(), buf, sizeof buf, 0);
    ASSERT_GT(n, 0);
    EXPECT_EQ(std::string(buf, static_cast<size_t>(n)).rfind("HTTP/1.1 200", 0), 0u);
  }
  EXPECT_EQ(h.call("GET", "/machine-config").status, 200);  // the last free slot
}

// Issue #8 defect 5: a subscriber that never reads used to make its output queue grow without
// bound. Now it gets a last line saying why and is closed once it falls 256 KiB behind.
TEST(ApiServer, SlowEventSubscriberIsDroppedWithALastLine) {
  ApiServerOptions opts;
  opts.read_timeout = std::chrono::minutes(10);  // the test reads the drop line when it is ready
  ApiHarness h(opts);
  UniqueFd fd = raw_connect(h.sock);
  std::string head = open_event_stream(fd);
  ASSERT_EQ(head.rfind("HTTP/1.1 200", 0), 0u) << head;
  // 4 MiB of events while the subscriber reads nothing: far more than a socket buffers.
  const std::string pad(1024, 'x');
  for (int i = 0; i < 4096; ++i) h.events.publish({{"event", "test"}, {"pad", pad}});
  std::string body = head.substr(head.find("\r\n\r\n") + 4) + read_to_close(fd);
  ASSERT_FALSE(body.empty());
  ASSERT_EQ(body.back(), '\n');
  EXPECT_LT(body.size(), size_t{4} << 20);
  std::vector<std::string> lines;
  for (size_t pos = 0; pos < body.size();) {
    size_t nl = body.find('\n', pos);
    lines.push_back(body.substr(pos, nl - pos));
    pos = nl + 1;
  }
  auto last = nlohmann::json::parse(lines.back());
  EXPECT_EQ(last["event"], "dropped");
  EXPECT_EQ(last["reason"],
            "this subscriber fell more than 262144 bytes of events behind; reconnect for the "
            "backlog");
  // What came before is an unbroken run of events (none lost in the middle).
  uint64_t seq = 0;
  for (size_t i = 0; i + 1 < lines.size(); ++i) {
    auto j = nlohmann::json::parse(lines[i]);
    if (seq) {
      EXPECT_EQ(j["seq"].get<uint64_t>(), seq + 1);
    }
    seq = j["seq"].get<uint64_t>();
  }
  // The server is fine, and a new subscriber gets the backlog.
  EXPECT_EQ(h.call("GET", "/").status, 200);
  UniqueFd again = raw_connect(h.sock);
  EXPECT_EQ(open_event_stream(again).rfind("HTTP/1.1 200", 0), 0u);
}

// A subscriber that shuts down its sending side after the request (socat, nc -N) used to get the
// backlog and then the end of the stream at once - which reads as "tern exited".
TEST(ApiServer, HalfClosedEventSubscriberStillGetsLiveEvents) {
  ApiHarness h;
  UniqueFd fd = raw_connect(h.sock);
  std::string head = open_event_stream(fd);
  ASSERT_EQ(head.rfind("HTTP/1.1 200", 0), 0u) << head;
  ASSERT_EQ(::shutdown(fd.get(), SHUT_WR), 0);
  // Event after event, each read back before the next: the old server ended the stream as soon as
  // it saw the EOF, so one of these never came.
  std::string got = head;
  char buf[4096];
  for (int k = 0; k < 20; ++k) {
    const std::string name = "test-live-" + std::to_string(k);
    h.events.publish({{"event", name}});
    while (got.find("\"" + name + "\"") == std::string::npos) {
      ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);  // 10 s timeout (raw_connect)
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
    ASSERT_NE(got.find("\"event\":\"" + name + "\""), std::string::npos) << got;
  }
  // Closing it altogether frees its stream slot (at the next event at the latest).
  fd.reset();
  h.events.publish({{"event", "test-after-close"}});
  ApiServerOptions defaults;
  std::vector<UniqueFd> streams;
  for (size_t i = 0; i + 1 < defaults.max_event_streams; ++i) {
    streams.push_back(raw_connect(h.sock));
    EXPECT_EQ(open_event_stream(streams.back()).rfind("HTTP/1.1 200", 0), 0u) << i;
  }
  // The last one needs the closed subscriber's slot: the server frees it when that event's write
  // fails, on its own thread, so ask until it is there (bounded).
  std::string last;
  for (int i = 0; i < 200 && last.rfind("HTTP/1.1 200", 0) != 0; ++i) {
    if (i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    UniqueFd fd2 = raw_connect(h.sock);
    last = open_event_stream(fd2);
    if (last.rfind("HTTP/1.1 200", 0) == 0) streams.push_back(std::move(fd2));
  }
  EXPECT_EQ(last.rfind("HTTP/1.1 200", 0), 0u) << last;
}

TEST(ApiServer, EventsStreamBacklogThenLiveUntilExit) {
  ApiHarness h;
  h.configure_and_start();
  std::vector<std::string> seen;
  std::promise<void> connected;  // the stream is open once its first (backlog) line arrived
  std::thread reader([&] {
    auto r = api_read_events(h.sock, [&](const std::string& line) {
      seen.push_back(line);
      if (seen.size() == 1) connected.set_value();
      return true;
    });
    EXPECT_TRUE(r);
    if (seen.empty()) connected.set_value();
  });
  connected.get_future().wait();
  EXPECT_EQ(h.call("PATCH", "/vm", R"({"state": "Paused"})").status, 204);
  EXPECT_EQ(h.call("PUT", "/tern/power-off").status, 204);
  EXPECT_EQ(h.wait_exit(), 0);
  // As in tern: once the control loop ended, shutdown flushes the stream and closes it.
  h.shutdown_server();
  reader.join();
  std::vector<std::string> states;
  for (auto& l : seen) {
    auto j = nlohmann::json::parse(l);
    if (j["event"] == "state") states.push_back(j["state"]);
  }
  EXPECT_EQ(states, (std::vector<std::string>{"Not started", "Running", "Paused", "Stopped"}));
}

}  // namespace
}  // namespace tern
