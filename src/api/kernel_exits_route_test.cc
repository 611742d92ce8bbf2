// Unit tests: PUT /tern/kernel-exits {"enabled": bool} and GET /tern/stats "kernel_exits", over a
// real Unix socket through the API server and the control loop, with a fake Machine (no KVM, no
// BPF): 204 on success, 400 with the reason when the accounting cannot start, unknown fields and
// bad types refused naming them; before boot the setting goes to the configuration (the VM starts
// with it); GET /vm/config shows it.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <thread>

#include "api/api_client.h"
#include "api/api_parser.h"
#include "api/api_server.h"
#include "vmm/control_loop.h"
#include "vmm/testing/stub_machine.h"

namespace tern {
namespace {

using Json = nlohmann::json;

/// A Machine whose in-kernel accounting is a flag, or fails with `fail_reason`.
class KernelExitsMachine : public testing::StubMachine {
 public:
  class Stats : public StatsSource {
   public:
    explicit Stats(const KernelExitsMachine& m) : m_(m) {}
    Json stats_json() const override {
      if (m_.on) return {{"timestamp_ns", 1}, {"kernel_exits", {{"enabled", true}}}};
      if (!m_.last_error.empty())
        return {{"timestamp_ns", 1},
                {"kernel_exits", {{"enabled", false}, {"error", m_.last_error}}}};
      return {{"timestamp_ns", 1}, {"kernel_exits", {{"enabled", false}}}};
    }
    std::string metrics_text() const override { return ""; }

   private:
    const KernelExitsMachine& m_;
  };
  const StatsSource& stats() const override { return stats_; }
  Result<void> set_kernel_exits(bool enabled) override {
    ++calls;
    if (enabled && !fail_reason.empty()) {
      last_error = "in-kernel exit accounting: " + fail_reason;
      return fail("in-kernel exit accounting", fail_reason);
    }
    last_error.clear();
    on = enabled;
    return {};
  }

  std::atomic<bool> on{false};
  std::atomic<int> calls{0};
  std::string fail_reason;
  std::string last_error;
  Stats stats_{*this};
};

class Harness {
 public:
  /// `before_run` acts on the loop before its control thread starts, as `tern run`/`restore` do.
  explicit Harness(std::string fail_reason = {},
                   const std::function<void(ControlLoop&)>& before_run = {})
      : fail_reason_(std::move(fail_reason)) {
    sock = "/tmp/tern-kexits-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) +
           ".sock";
    auto loop = ControlLoop::create(
        [this](const VmConfig& c) -> tl::expected<std::unique_ptr<Machine>, StartFailure> {
          built = c;
          auto m = std::make_unique<KernelExitsMachine>();
          m->fail_reason = fail_reason_;
          // What Vm::build() does with VmConfig::kernel_exits before the first KVM_RUN.
          if (c.kernel_exits) (void)m->set_kernel_exits(true);
          machine = m.get();
          return m;
        },
        events,
        [this](const SnapshotLoadSpec&,
               VmResources&) -> tl::expected<std::unique_ptr<Machine>, StartFailure> {
          // A restored VM: its configuration is the snapshot's (kernel-exits off), nothing runs.
          auto m = std::make_unique<KernelExitsMachine>();
          machine = m.get();
          return m;
        });
    EXPECT_TRUE(loop);
    loop_ = std::move(*loop);
    CommandQueue* q = &loop_->queue();
    auto server = ApiServer::start(
        sock,
        [q](ApiRequest r, std::function<void(ApiResponse)> reply) {
          q->push(cmd::Api{std::move(r), std::move(reply)});
        },
        events);
    EXPECT_TRUE(server) << server.error().message();
    server_ = std::move(*server);
    if (before_run) before_run(*loop_);
    control_ = std::thread([this] { loop_->run(); });
  }
  ~Harness() {
    loop_->queue().push(cmd::Signal{SIGTERM});
    control_.join();
    server_->shutdown();
  }
  HttpReply call(std::string_view method, std::string_view target, std::string_view body = {}) {
    auto r = api_request(sock, method, target, body);
    EXPECT_TRUE(r) << r.error().message();
    return r ? *r : HttpReply{};
  }
  Json get(std::string_view target) {
    HttpReply r = call("GET", target);
    EXPECT_EQ(r.status, 200) << r.body;
    return Json::parse(r.body, nullptr, false);
  }
  void start_vm() {
    ASSERT_EQ(call("PUT", "/boot-source", R"({"kernel_image_path": "/proc/self/exe"})").status,
              204);
    ASSERT_EQ(call("PUT", "/actions", R"({"action_type": "InstanceStart"})").status, 204);
  }

  std::string sock;
  EventLog events;
  VmConfig built;
  KernelExitsMachine* machine = nullptr;

 private:
  static inline int counter = 0;
  std::string fail_reason_;
  std::unique_ptr<ControlLoop> loop_;
  std::unique_ptr<ApiServer> server_;
  std::thread control_;
};

std::string fault_of(const HttpReply& r) {
  auto j = Json::parse(r.body, nullptr, false);
  return j.is_object() && j.contains("fault_message") ? j["fault_message"].get<std::string>() : "";
}

TEST(KernelExitsRoute, BodyIsValidatedFirst) {
  auto parse = [](std::string_view body) {
    return parse_api_request("PUT", "/tern/kernel-exits", body);
  };
  auto on = parse(R"({"enabled": true})");
  ASSERT_TRUE(on);
  EXPECT_TRUE(std::get<api::PutKernelExits>(*on).value.enabled);
  auto off = parse(R"({"enabled": false})");
  ASSERT_TRUE(off);
  EXPECT_FALSE(std::get<api::PutKernelExits>(*off).value.enabled);
  auto fault = [&](std::string_view body) {
    auto r = parse(body);
    EXPECT_FALSE(r) << body;
    if (r) return std::string();
    EXPECT_EQ(r.error().status, 400);
    return Json::parse(r.error().body)["fault_message"].get<std::string>();
  };
  EXPECT_EQ(fault(R"({})"), "enabled: missing required field (true or false)");
  EXPECT_EQ(fault(R"({"enabled": "yes"})").rfind("enabled: ", 0), 0u);
  EXPECT_EQ(fault(R"({"enabled": 1})").rfind("enabled: ", 0), 0u);
  EXPECT_EQ(fault(R"({"enabled": true, "method": "perf"})"), "method: unknown field");
  EXPECT_EQ(fault(R"([true])").empty(), false);
  EXPECT_EQ(fault("").rfind("body: missing", 0), 0u);
  // Only PUT.
  EXPECT_FALSE(parse_api_request("GET", "/tern/kernel-exits", ""));
}

TEST(KernelExitsRoute, OnAndOffWhileRunning) {
  Harness h;
  h.start_vm();
  ASSERT_NE(h.machine, nullptr);
  EXPECT_EQ(h.get("/tern/stats")["kernel_exits"], Json({{"enabled", false}}));
  HttpReply on = h.call("PUT", "/tern/kernel-exits", R"({"enabled": true})");
  EXPECT_EQ(on.status, 204) << on.body;
  EXPECT_TRUE(h.machine->on);
  EXPECT_EQ(h.get("/tern/stats")["kernel_exits"]["enabled"], true);
  EXPECT_EQ(h.get("/vm/config")["kernel-exits"], Json({{"enabled", true}}));
  HttpReply off = h.call("PUT", "/tern/kernel-exits", R"({"enabled": false})");
  EXPECT_EQ(off.status, 204) << off.body;
  EXPECT_FALSE(h.machine->on);
  EXPECT_EQ(h.get("/vm/config")["kernel-exits"], Json({{"enabled", false}}));
}

TEST(KernelExitsRoute, CannotStartIs400WithTheReason) {
  Harness h("bpf(BPF_PROG_LOAD): needs CAP_BPF and CAP_PERFMON (or root): Operation not permitted");
  h.start_vm();
  HttpReply r = h.call("PUT", "/tern/kernel-exits", R"({"enabled": true})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(fault_of(r),
            "PUT /tern/kernel-exits: in-kernel exit accounting: bpf(BPF_PROG_LOAD): needs CAP_BPF "
            "and CAP_PERFMON (or root): Operation not permitted");
  Json k = h.get("/tern/stats")["kernel_exits"];
  EXPECT_EQ(k["enabled"], false);
  EXPECT_NE(k.value("error", "").find("CAP_BPF"), std::string::npos) << k.dump();
  EXPECT_EQ(h.get("/vm/config")["kernel-exits"], Json({{"enabled", false}}));
  // Off always works.
  EXPECT_EQ(h.call("PUT", "/tern/kernel-exits", R"({"enabled": false})").status, 204);
}

TEST(KernelExitsRoute, BadBodyOverTheSocket) {
  Harness h;
  HttpReply r = h.call("PUT", "/tern/kernel-exits", R"({"enabled": true, "maps": 4})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(fault_of(r), "maps: unknown field");
}

// Before the VM is built the setting is configuration: the VM is built with it, so the
// accounting starts before the first KVM_RUN; GET /tern/stats says so meanwhile.
TEST(KernelExitsRoute, BeforeBootItConfiguresTheVm) {
  Harness h;
  EXPECT_EQ(h.get("/tern/stats")["kernel_exits"], Json({{"enabled", false}}));
  ASSERT_EQ(h.call("PUT", "/tern/kernel-exits", R"({"enabled": true})").status, 204);
  EXPECT_EQ(h.get("/tern/stats")["kernel_exits"], Json({{"enabled", false}, {"requested", true}}));
  EXPECT_EQ(h.get("/vm/config")["kernel-exits"], Json({{"enabled", true}}));
  h.start_vm();
  EXPECT_TRUE(h.built.kernel_exits);
  ASSERT_NE(h.machine, nullptr);
  EXPECT_TRUE(h.machine->on);
  EXPECT_EQ(h.get("/tern/stats")["kernel_exits"]["enabled"], true);
}

// Asked for before PUT /snapshot/load: the restored VM has it on before its vCPUs first run, as a
// booted one does (the request used to be dropped with the rest of the pre-load configuration).
TEST(KernelExitsRoute, BeforeSnapshotLoadItIsOnInTheRestoredVm) {
  Harness h;
  ASSERT_EQ(h.call("PUT", "/tern/kernel-exits", R"({"enabled": true})").status, 204);
  HttpReply load = h.call("PUT", "/snapshot/load",
                          R"({"snapshot_path": "/proc/self/exe", "mem_backend":
                              {"backend_type": "File", "backend_path": "/proc/self/exe"}})");
  ASSERT_EQ(load.status, 204) << load.body << "\n" << load.content_type;
  ASSERT_NE(h.machine, nullptr);
  EXPECT_TRUE(h.machine->on);
  EXPECT_EQ(h.get("/tern/stats")["kernel_exits"]["enabled"], true);
  EXPECT_EQ(h.get("/vm/config")["kernel-exits"], Json({{"enabled", true}}));
}

// `tern restore --kernel-exits`: asked for before the restore, on in the restored VM before its
// vCPUs first run (a snapshot does not carry the setting).
TEST(KernelExitsRoute, RestoreWithKernelExitsHasItOn) {
  Harness h({}, [](ControlLoop& l) {
    l.request_kernel_exits();
    ASSERT_TRUE(l.restore(SnapshotLoadSpec{"/proc/self/exe", "/proc/self/exe", false}, "stdio"));
  });
  ASSERT_NE(h.machine, nullptr);
  EXPECT_TRUE(h.machine->on);
  EXPECT_EQ(h.get("/tern/stats")["kernel_exits"]["enabled"], true);
  EXPECT_EQ(h.get("/vm/config")["kernel-exits"], Json({{"enabled", true}}));
}

// A VM whose accounting could not start at boot still starts (the warning is Vm::build's); the
// stats carry the reason.
TEST(KernelExitsRoute, BootStartFailureKeepsTheVm) {
  Harness h("no kernel BTF (/sys/kernel/btf/vmlinux; CONFIG_DEBUG_INFO_BTF)");
  ASSERT_EQ(h.call("PUT", "/tern/kernel-exits", R"({"enabled": true})").status, 204);
  h.start_vm();
  EXPECT_EQ(h.get("/")["state"], "Running");
  EXPECT_EQ(h.get("/tern/stats")["kernel_exits"],
            Json({{"enabled", false},
                  {"error",
                   "in-kernel exit accounting: no kernel BTF (/sys/kernel/btf/vmlinux; "
                   "CONFIG_DEBUG_INFO_BTF)"}}));
}

}  // namespace
}  // namespace tern
