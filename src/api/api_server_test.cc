// Unit tests: the API server and the control loop together, over a real Unix socket, with a fake
// Machine (no KVM): the Firecracker flow, snapshots, wrong-state requests, drives, power-off,
// handler failures. HTTP robustness, connections and events: api_server_connections_test.cc.
#include "api/api_server.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <future>
#include <thread>

#include "api/testing/api_harness.h"

namespace tern {
namespace {

using testing::ApiHarness;
using testing::fault_of;

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

}  // namespace
}  // namespace tern
