// Unit tests: the control loop's one configuration (VmResources) and its lifecycle table, driven
// with a fake Machine (no KVM): every GET renders what the CLI, the API or a restore wrote.
// Regression tests for issue #9's two configuration bugs: GET /vm/config after `tern run --disk
// ... --api-sock` lists the drives; GET /machine-config after a restore reports the snapshot's
// vCPUs and RAM, not Firecracker's defaults.
#include "vmm/control_loop.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <future>
#include <thread>

#include "api/api_parser.h"
#include "cli/run_command.h"
#include "vmm/testing/stub_machine.h"

namespace tern {
namespace {

class FakeMachine : public testing::StubMachine {
 public:
  explicit FakeMachine(std::atomic<int>* starts) : starts_(starts) {}
  void start() override { ++*starts_; }
  bool send_ctrl_alt_del() override { return true; }
  Result<SnapshotReport> save_snapshot(const SnapshotCreateSpec&, const SaveProgress&,
                                       const std::atomic<bool>&) override {
    return SnapshotReport{};
  }

 private:
  std::atomic<int>* starts_;
};

// The snapshot a fake restore "reads": 2 vCPUs, 256 MiB, one disk, the rng and an interface.
snap::MachineState saved_machine() {
  snap::MachineState m;
  m.vcpus = 2;
  m.memory_bytes = 256ull << 20;
  m.cmdline = "console=ttyS0 root=/dev/vda rw";
  m.kernel_path = "/boot/vmlinuz";
  DiskSpec disk;
  disk.path = "/img/root.ext4";
  m.devices.push_back({DeviceSpec(std::in_place_type<DiskSpec>, disk), {}});
  RngSpec rng;
  rng.rate_limiter.ops = TokenBucketConfig{100, 0, 1000};
  m.devices.push_back({DeviceSpec(std::in_place_type<RngSpec>, rng), {}});
  NetSpec net;
  net.iface_id = "eth0";
  net.host_dev_name = "tap7";
  net.guest_mac = MacAddress{0x02, 0, 0, 0, 0, 7};
  net.queue_pairs = 2;
  m.devices.push_back({DeviceSpec(std::in_place_type<NetSpec>, net), {}});
  return m;
}

/// A ControlLoop on its own control thread, with fake boot and restore factories.
class Harness {
 public:
  explicit Harness(const std::function<void(ControlLoop&)>& before_run = {}) {
    auto loop = ControlLoop::create(
        [this](const VmConfig& c) -> tl::expected<std::unique_ptr<Machine>, StartFailure> {
          built = c;
          return std::make_unique<FakeMachine>(&starts);
        },
        events,
        [this](const SnapshotLoadSpec&,
               VmResources& r) -> tl::expected<std::unique_ptr<Machine>, StartFailure> {
          // What create_restored_machine() does once the snapshot is read and the VM rebuilt.
          r = VmResources::from_machine_state(saved_machine(), r.console);
          return std::make_unique<FakeMachine>(&starts);
        });
    EXPECT_TRUE(loop);
    loop_ = std::move(*loop);
    if (before_run) before_run(*loop_);
    control_ = std::thread([this] { status_ = loop_->run(); });
  }
  ~Harness() {
    if (control_.joinable()) {
      loop_->queue().push(cmd::Signal{SIGTERM});
      control_.join();
    }
  }
  /// Parses and executes one request on the control thread.
  ApiResponse call(std::string_view method, std::string_view target, std::string_view body = {}) {
    auto req = parse_api_request(method, target, body);
    if (!req) return req.error();
    std::promise<ApiResponse> p;
    auto f = p.get_future();
    loop_->queue().push(
        cmd::Api{std::move(*req), [&p](ApiResponse r) { p.set_value(std::move(r)); }});
    return f.get();
  }
  nlohmann::json get(std::string_view target) {
    auto r = call("GET", target);
    EXPECT_EQ(r.status, 200) << r.body;
    return nlohmann::json::parse(r.body);
  }
  std::string state() { return get("/")["state"]; }
  /// Waits for the control loop to end by itself (the VM stopped); its exit status.
  int wait_status() {
    if (control_.joinable()) control_.join();
    return status_;
  }

  EventLog events;
  VmConfig built;
  std::atomic<int> starts{0};

 private:
  std::unique_ptr<ControlLoop> loop_;
  std::thread control_;
  int status_ = -1;
};

std::string fault_of(const ApiResponse& r) {
  auto j = nlohmann::json::parse(r.body, nullptr, false);
  return j.is_object() && j.contains("fault_message") ? j["fault_message"].get<std::string>() : "";
}

// Bug (a): `tern run --disk path=... --api-sock S`, then GET /vm/config listed no drives.
TEST(ControlLoopConfig, CliDisksAndRngAreInVmConfig) {
  RunOptions o;
  o.kernel = "/boot/vmlinuz";
  o.memory = "1G";
  o.cpus = 3;
  o.disks = {"path=/img/a.raw", "path=/img/b.raw,readonly=on,cache=none,io=threads"};
  o.devices["--rng"] = "bandwidth=1M,refill_time=500";
  auto r = run_resources(o);
  ASSERT_TRUE(r) << r.error().message();
  Harness h([&](ControlLoop& loop) {
    loop.configure(*r);
    ASSERT_TRUE(loop.start());
  });
  EXPECT_EQ(h.state(), "Running");
  auto cfg = h.get("/vm/config");
  ASSERT_EQ(cfg["drives"].size(), 2u) << cfg.dump();
  EXPECT_EQ(cfg["drives"][0]["drive_id"], "vda");
  EXPECT_EQ(cfg["drives"][0]["path_on_host"], "/img/a.raw");
  EXPECT_EQ(cfg["drives"][0]["is_root_device"], false);
  EXPECT_EQ(cfg["drives"][0]["is_read_only"], false);
  EXPECT_EQ(cfg["drives"][0]["cache_type"], "writeback");
  EXPECT_EQ(cfg["drives"][1]["drive_id"], "vdb");
  EXPECT_EQ(cfg["drives"][1]["is_read_only"], true);
  EXPECT_EQ(cfg["drives"][1]["cache_type"], "none");
  EXPECT_EQ(cfg["drives"][1]["io_engine"], "threads");
  EXPECT_EQ(cfg["machine-config"]["vcpu_count"], 3);
  EXPECT_EQ(cfg["machine-config"]["mem_size_mib"], 1024);
  EXPECT_EQ(cfg["entropy"]["rate_limiter"]["bandwidth"]["size"], 1 << 20);
  EXPECT_EQ(cfg["entropy"]["rate_limiter"]["bandwidth"]["refill_time"], 500);
  EXPECT_EQ(cfg["network-interfaces"], nlohmann::json::array());
  EXPECT_EQ(h.get("/machine-config")["vcpu_count"], 3);
  // The VM was built from the same configuration: disks in order, then the rng.
  ASSERT_EQ(h.built.devices.size(), 3u);
  EXPECT_EQ(std::get<DiskSpec>(h.built.devices[0]).path, "/img/a.raw");
  EXPECT_EQ(std::get<DiskSpec>(h.built.devices[1]).path, "/img/b.raw");
  EXPECT_TRUE(std::holds_alternative<RngSpec>(h.built.devices[2]));
  EXPECT_EQ(h.built.memory_bytes, 1ull << 30);
}

// Bug (b): after `tern restore` (ControlLoop::restore), GET /machine-config said 1 vCPU, 128 MiB.
TEST(ControlLoopConfig, RestoreReportsTheSnapshotsConfiguration) {
  Harness h([](ControlLoop& loop) {
    ASSERT_TRUE(loop.restore(SnapshotLoadSpec{"/s.state", "/s.mem", false}, "file:/tmp/con"));
  });
  EXPECT_EQ(h.state(), "Paused");
  auto mc = h.get("/machine-config");
  EXPECT_EQ(mc["vcpu_count"], 2);
  EXPECT_EQ(mc["mem_size_mib"], 256);
  auto cfg = h.get("/vm/config");
  EXPECT_EQ(cfg["machine-config"]["vcpu_count"], 2);
  EXPECT_EQ(cfg["boot-source"]["kernel_image_path"], "/boot/vmlinuz");
  ASSERT_EQ(cfg["drives"].size(), 1u);
  EXPECT_EQ(cfg["drives"][0]["drive_id"], "vda");
  EXPECT_EQ(cfg["drives"][0]["path_on_host"], "/img/root.ext4");
  EXPECT_EQ(cfg["entropy"]["rate_limiter"]["ops"]["size"], 100);
  EXPECT_EQ(cfg["network-interfaces"],
            nlohmann::json::parse(R"([{"iface_id": "eth0", "host_dev_name": "tap7",
                                       "guest_mac": "02:00:00:00:00:07", "queues": 2,
                                       "vhost": false}])"));
  // The first resume starts the restored VM's vCPUs.
  EXPECT_EQ(h.starts, 0);
  EXPECT_EQ(h.call("PATCH", "/vm", R"({"state": "Resumed"})").status, 204);
  EXPECT_EQ(h.starts, 1);
  EXPECT_EQ(h.state(), "Running");
}

// Bug (b) through the API: PUT /snapshot/load into a fresh tern --api-sock.
TEST(ControlLoopConfig, SnapshotLoadReportsTheSnapshotsConfiguration) {
  Harness h;
  EXPECT_EQ(h.get("/machine-config")["vcpu_count"], 1);  // Firecracker's defaults before
  auto r = h.call(
      "PUT", "/snapshot/load",
      R"({"snapshot_path": "/proc/self/exe", "mem_backend": {"backend_type": "File", "backend_path": "/proc/self/exe"}, "resume_vm": true})");
  ASSERT_EQ(r.status, 204) << r.body;
  EXPECT_EQ(h.state(), "Running");
  EXPECT_EQ(h.starts, 1);
  auto mc = h.get("/machine-config");
  EXPECT_EQ(mc["vcpu_count"], 2);
  EXPECT_EQ(mc["mem_size_mib"], 256);
  EXPECT_EQ(h.get("/vm/config")["drives"].size(), 1u);
}

// PUT /network-interfaces/{id} adds or replaces by id (pre-boot only); PATCH is a checked no-op
// for a known id before and after boot; queues over the vCPUs fail InstanceStart, named.
TEST(ControlLoopConfig, NetworkInterfacesAreKeyed) {
  Harness h;
  EXPECT_EQ(h.get("/vm/config")["network-interfaces"], nlohmann::json::array());
  auto put = [&](const char* id, const char* body) {
    return h.call("PUT", std::string("/network-interfaces/") + id, body);
  };
  ASSERT_EQ(put("eth0", R"({"iface_id": "eth0", "host_dev_name": "tap0"})").status, 204);
  ASSERT_EQ(put("eth1", R"({"iface_id": "eth1", "host_dev_name": "tap1"})").status, 204);
  ASSERT_EQ(put("eth0", R"({"iface_id": "eth0", "host_dev_name": "tapx", "queues": 2})").status,
            204);
  auto list = h.get("/vm/config")["network-interfaces"];
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0]["iface_id"], "eth0");  // replaced in place
  EXPECT_EQ(list[0]["host_dev_name"], "tapx");
  EXPECT_EQ(list[1]["iface_id"], "eth1");
  auto unknown = h.call("PATCH", "/network-interfaces/eth9", R"({"iface_id": "eth9"})");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_EQ(fault_of(unknown), "PATCH /network-interfaces/eth9: no device \"eth9\" is configured");
  EXPECT_EQ(h.call("PATCH", "/network-interfaces/eth1", R"({"iface_id": "eth1"})").status, 204);
  ASSERT_EQ(h.call("PUT", "/boot-source", R"({"kernel_image_path": "/proc/self/exe"})").status,
            204);
  auto start = h.call("PUT", "/actions", R"({"action_type": "InstanceStart"})");
  EXPECT_EQ(fault_of(start),
            "InstanceStart: network-interfaces[0].queues: eth0: 2 queue pairs, "
            "more than the VM's 1 vCPU");
  EXPECT_EQ(h.starts, 0);
  ASSERT_EQ(h.call("PATCH", "/machine-config", R"({"vcpu_count": 2})").status, 204);
  ASSERT_EQ(h.call("PUT", "/actions", R"({"action_type": "InstanceStart"})").status, 204);
  ASSERT_EQ(h.built.devices.size(), 2u);
  EXPECT_EQ(std::get<NetSpec>(h.built.devices[0]).host_dev_name, "tapx");
  EXPECT_EQ(std::get<NetSpec>(h.built.devices[1]).iface_id, "eth1");
  EXPECT_EQ(fault_of(put("eth2", R"({"iface_id": "eth2", "host_dev_name": "tap2"})")),
            "PUT /network-interfaces is pre-boot only: the VM is Running");
  EXPECT_EQ(h.call("PATCH", "/network-interfaces/eth1", R"({"iface_id": "eth1"})").status, 204);
  EXPECT_EQ(h.call("PATCH", "/network-interfaces/eth9", R"({"iface_id": "eth9"})").status, 404);
}

// Two interfaces on one tap (or with one guest_mac) are refused at InstanceStart, naming the
// second one's field; nothing is built.
TEST(ControlLoopConfig, InterfacesSharingATapOrMacAreRefused) {
  Harness h;
  ASSERT_EQ(h.call("PUT", "/boot-source", R"({"kernel_image_path": "/proc/self/exe"})").status,
            204);
  auto put = [&](const char* id, const char* body) {
    return h.call("PUT", std::string("/network-interfaces/") + id, body).status;
  };
  ASSERT_EQ(put("a", R"({"iface_id": "a", "host_dev_name": "tap0",
                         "guest_mac": "02:00:00:00:00:01"})"),
            204);
  ASSERT_EQ(put("b", R"({"iface_id": "b", "host_dev_name": "tap0"})"), 204);
  auto start = h.call("PUT", "/actions", R"({"action_type": "InstanceStart"})");
  EXPECT_EQ(fault_of(start),
            "InstanceStart: network-interfaces[1].host_dev_name: b: tap "
            "\"tap0\" is already used by interface \"a\"");
  ASSERT_EQ(put("b", R"({"iface_id": "b", "host_dev_name": "tap1",
                         "guest_mac": "02:00:00:00:00:01"})"),
            204);
  start = h.call("PUT", "/actions", R"({"action_type": "InstanceStart"})");
  EXPECT_EQ(fault_of(start),
            "InstanceStart: network-interfaces[1].guest_mac: b: "
            "02:00:00:00:00:01 is already the MAC of interface \"a\"");
  EXPECT_EQ(h.starts, 0);
  ASSERT_EQ(put("b", R"({"iface_id": "b", "host_dev_name": "tap1"})"), 204);
  EXPECT_EQ(h.call("PUT", "/actions", R"({"action_type": "InstanceStart"})").status, 204);
}

TEST(ControlLoopConfig, PutEntropyIsPreBootOnlyAndRendered) {
  Harness h;
  EXPECT_EQ(h.get("/vm/config")["entropy"], nullptr);
  EXPECT_EQ(
      h.call("PUT", "/entropy", R"({"rate_limiter": {"ops": {"size": 10, "refill_time": 100}}})")
          .status,
      204);
  auto cfg = h.get("/vm/config");
  EXPECT_EQ(cfg["entropy"]["rate_limiter"]["ops"]["size"], 10);
  EXPECT_EQ(cfg["entropy"]["rate_limiter"]["ops"]["refill_time"], 100);
  EXPECT_EQ(h.call("PUT", "/entropy", "{}").status, 204);
  EXPECT_EQ(h.get("/vm/config")["entropy"], nlohmann::json({{"rate_limiter", nullptr}}));
  ASSERT_EQ(h.call("PUT", "/boot-source", R"({"kernel_image_path": "/proc/self/exe"})").status,
            204);
  ASSERT_EQ(h.call("PUT", "/actions", R"({"action_type": "InstanceStart"})").status, 204);
  ASSERT_EQ(h.built.devices.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<RngSpec>(h.built.devices[0]));
  EXPECT_EQ(fault_of(h.call("PUT", "/entropy", "{}")),
            "PUT /entropy is pre-boot only: the VM is Running");
}

TEST(ControlLoopLifecycle, PowerOffDuringRunIsStatusZeroAndStateEventsAreShownNames) {
  Harness h;
  ASSERT_EQ(h.call("PUT", "/machine-config", R"({"vcpu_count": 1, "mem_size_mib": 64})").status,
            204);
  EXPECT_EQ(h.state(), "Not started");  // configured, still "Not started"
  ASSERT_EQ(h.call("PUT", "/boot-source", R"({"kernel_image_path": "/proc/self/exe"})").status,
            204);
  ASSERT_EQ(h.call("PUT", "/actions", R"({"action_type": "InstanceStart"})").status, 204);
  EXPECT_EQ(h.call("PUT", "/tern/power-off").status, 204);
  // The fake VM stops at once and the loop ends with it: read what it published afterwards.
  EXPECT_EQ(h.wait_status(), 0);
  std::vector<std::string> states;
  for (const auto& line : h.events.lines()) {
    auto j = nlohmann::json::parse(line);
    if (j["event"] == "state") states.push_back(j["state"]);
  }
  // Configured and Stopping are never shown: only Firecracker's names, each change once.
  EXPECT_EQ(states, (std::vector<std::string>{"Not started", "Running", "Stopped"}));
}

}  // namespace
}  // namespace tern
