// Unit tests: the API request parser accepts the bodies Firecracker's documentation uses and names
// the field in every rejection.
#include "api/api_parser.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "api/json_reader.h"
#include "base/testing/temp_dir.h"
#include "virtio/net/net_config.h"

namespace tern {
namespace {

// A file that exists and is readable, standing in for kernel/initrd/disk paths.
const std::string kFile = "/proc/self/exe";

std::string fault(const tl::expected<ApiRequest, ApiResponse>& r) {
  EXPECT_FALSE(r.has_value());
  if (r) return {};
  EXPECT_EQ(r.error().status, 400);
  return nlohmann::json::parse(r.error().body).at("fault_message").get<std::string>();
}

// tern extension "boot_protocol" in PUT /boot-source: the three values, rendered back by to_json
// only when not "auto"; anything else is a 400 naming the field.
TEST(ApiParser, BootSourceBootProtocol) {
  for (auto [text, want] : {std::pair{"auto", BootProtocol::kAuto},
                            {"pvh", BootProtocol::kPvh},
                            {"bzimage", BootProtocol::kBzImage}}) {
    auto r = parse_api_request("PUT", "/boot-source",
                               std::string(R"({"kernel_image_path": "/proc/self/exe", )") +
                                   R"("boot_protocol": ")" + text + R"("})");
    ASSERT_TRUE(r) << r.error().body;
    const auto& b = std::get<api::PutBootSource>(*r).value;
    EXPECT_EQ(b.boot_protocol, want);
    EXPECT_EQ(to_json(b).contains("boot_protocol"), want != BootProtocol::kAuto);
  }
  auto bad = parse_api_request("PUT", "/boot-source",
                               R"({"kernel_image_path": "/proc/self/exe", "boot_protocol": 1})");
  EXPECT_NE(fault(bad).find("boot_protocol"), std::string::npos);
  bad = parse_api_request("PUT", "/boot-source",
                          R"({"kernel_image_path": "/proc/self/exe", "boot_protocol": "elf"})");
  EXPECT_NE(fault(bad).find("boot_protocol: \"elf\" is not one of"), std::string::npos)
      << fault(bad);
}

// tern extension "firmware_path" / "firmware_vars_path" in PUT /boot-source: instead of
// kernel_image_path, rendered back; combinations refused naming the field.
TEST(ApiParser, BootSourceFirmware) {
  auto r = parse_api_request("PUT", "/boot-source", R"({"firmware_path": "/proc/self/exe"})");
  ASSERT_TRUE(r) << r.error().body;
  const auto& b = std::get<api::PutBootSource>(*r).value;
  EXPECT_EQ(b.firmware_path, "/proc/self/exe");
  EXPECT_TRUE(b.kernel_image_path.empty());
  auto j = to_json(b);
  EXPECT_EQ(j.at("firmware_path"), "/proc/self/exe");
  EXPECT_FALSE(j.contains("kernel_image_path"));
  auto both = parse_api_request(
      "PUT", "/boot-source",
      R"({"firmware_path": "/proc/self/exe", "kernel_image_path": "/proc/self/exe"})");
  EXPECT_NE(fault(both).find("firmware_path and kernel_image_path cannot be combined"),
            std::string::npos)
      << fault(both);
  auto vars = parse_api_request(
      "PUT", "/boot-source",
      R"({"kernel_image_path": "/proc/self/exe", "firmware_vars_path": "/proc/self/exe"})");
  EXPECT_NE(fault(vars).find("firmware_vars_path: needs firmware_path"), std::string::npos)
      << fault(vars);
  auto missing =
      parse_api_request("PUT", "/boot-source", R"({"firmware_path": "/nonexistent/bios.bin"})");
  EXPECT_NE(fault(missing).find("firmware_path: /nonexistent/bios.bin"), std::string::npos)
      << fault(missing);
  auto neither = parse_api_request("PUT", "/boot-source", R"({"boot_args": "quiet"})");
  EXPECT_NE(fault(neither).find("kernel_image_path: missing required field"), std::string::npos)
      << fault(neither);
}

// tern extension "on_reboot" in PUT /boot-source: "exit" and "restart", rendered back only when
// given (absent: the boot's default); anything else is a 400 naming the field.
TEST(ApiParser, BootSourceOnReboot) {
  for (auto [text, want] : {std::pair{"exit", OnReboot::kExit}, {"restart", OnReboot::kRestart}}) {
    auto r = parse_api_request("PUT", "/boot-source",
                               std::string(R"({"kernel_image_path": "/proc/self/exe", )") +
                                   R"("on_reboot": ")" + text + R"("})");
    ASSERT_TRUE(r) << r.error().body;
    const auto& b = std::get<api::PutBootSource>(*r).value;
    EXPECT_EQ(b.on_reboot, want);
    EXPECT_EQ(to_json(b)["on_reboot"], text);
  }
  auto none = parse_api_request("PUT", "/boot-source", R"({"kernel_image_path": "/proc/self/exe"})");
  ASSERT_TRUE(none);
  EXPECT_FALSE(std::get<api::PutBootSource>(*none).value.on_reboot);
  EXPECT_FALSE(to_json(std::get<api::PutBootSource>(*none).value).contains("on_reboot"));
  auto bad = parse_api_request("PUT", "/boot-source",
                               R"({"kernel_image_path": "/proc/self/exe", "on_reboot": "reset"})");
  EXPECT_NE(fault(bad).find(R"(on_reboot: "reset" is not one of "exit", "restart")"),
            std::string::npos)
      << fault(bad);
  bad = parse_api_request("PUT", "/boot-source",
                          R"({"kernel_image_path": "/proc/self/exe", "on_reboot": true})");
  EXPECT_NE(fault(bad).find("on_reboot"), std::string::npos);
}

// "firmware_vars_path" may name a store that does not exist yet: tern creates it from the
// template beside the code image (docs/firmware.md), as --firmware-vars does; a directory is
// still refused here.
TEST(ApiParser, BootSourceFirmwareVarsMayNotExistYet) {
  auto r = parse_api_request(
      "PUT", "/boot-source",
      R"({"firmware_path": "/proc/self/exe", "firmware_vars_path": "/tmp/tern-new-vm-vars.fd"})");
  ASSERT_TRUE(r) << r.error().body;
  EXPECT_EQ(std::get<api::PutBootSource>(*r).value.firmware_vars_path,
            "/tmp/tern-new-vm-vars.fd");
  auto dir = parse_api_request(
      "PUT", "/boot-source", R"({"firmware_path": "/proc/self/exe", "firmware_vars_path": "/tmp"})");
  EXPECT_NE(fault(dir).find("firmware_vars_path: /tmp: is a directory"), std::string::npos)
      << fault(dir);
}

// Bodies as Firecracker's getting-started guide and API docs write them.
TEST(ApiParser, FirecrackerDocumentationBodies) {
  auto boot = parse_api_request("PUT", "/boot-source",
                                R"({
            "kernel_image_path": "/proc/self/exe",
            "boot_args": "console=ttyS0 reboot=k panic=1 pci=off"
        })");
  ASSERT_TRUE(boot) << boot.error().body;
  const auto& b = std::get<api::PutBootSource>(*boot).value;
  EXPECT_EQ(b.kernel_image_path, kFile);
  EXPECT_EQ(b.boot_args, "console=ttyS0 reboot=k panic=1 pci=off");

  auto mc = parse_api_request("PUT", "/machine-config", R"({
            "vcpu_count": 2,
            "mem_size_mib": 1024
        })");
  ASSERT_TRUE(mc) << mc.error().body;
  EXPECT_EQ(std::get<api::PutMachineConfig>(*mc).value.vcpu_count, 2u);
  EXPECT_EQ(std::get<api::PutMachineConfig>(*mc).value.mem_size_mib, 1024u);

  auto mc_full = parse_api_request(
      "PUT", "/machine-config",
      R"({"vcpu_count": 2, "mem_size_mib": 1024, "smt": false, "track_dirty_pages": false, "huge_pages": "None"})");
  ASSERT_TRUE(mc_full) << mc_full.error().body;

  auto drive = parse_api_request("PUT", "/drives/rootfs", R"({
            "drive_id": "rootfs",
            "path_on_host": "/proc/self/exe",
            "is_root_device": true,
            "is_read_only": false
        })");
  ASSERT_TRUE(drive) << drive.error().body;
  const auto& d = std::get<api::PutDrive>(*drive).value;
  EXPECT_EQ(d.disk.cache, CacheMode::kUnsafe);       // Firecracker's default cache_type
  EXPECT_EQ(d.disk.engine, IoEngineKind::kThreads);  // Firecracker's default io_engine: Sync
  EXPECT_TRUE(d.is_root_device);

  EXPECT_TRUE(std::holds_alternative<api::InstanceStart>(
      *parse_api_request("PUT", "/actions", R"({"action_type": "InstanceStart"})")));
  EXPECT_TRUE(std::holds_alternative<api::SendCtrlAltDel>(
      *parse_api_request("PUT", "/actions", R"({"action_type": "SendCtrlAltDel"})")));
  EXPECT_TRUE(std::holds_alternative<api::FlushMetrics>(
      *parse_api_request("PUT", "/actions", R"({"action_type": "FlushMetrics"})")));
  EXPECT_TRUE(std::holds_alternative<api::PauseVm>(
      *parse_api_request("PATCH", "/vm", R"({"state": "Paused"})")));
  EXPECT_TRUE(std::holds_alternative<api::ResumeVm>(
      *parse_api_request("PATCH", "/vm", R"({"state": "Resumed"})")));
  EXPECT_TRUE(std::holds_alternative<api::GetInstanceInfo>(*parse_api_request("GET", "/", "")));
  EXPECT_TRUE(
      std::holds_alternative<api::GetVmConfig>(*parse_api_request("GET", "/vm/config", "")));
}

TEST(ApiParser, DriveCacheAndEngineMapping) {
  auto parse = [](const std::string& extra) {
    return parse_api_request(
        "PUT", "/drives/d1",
        R"({"drive_id": "d1", "path_on_host": "/proc/self/exe", "is_root_device": false)" + extra +
            "}");
  };
  auto wb = parse(R"(, "cache_type": "Writeback", "io_engine": "Async")");
  ASSERT_TRUE(wb) << wb.error().body;
  EXPECT_EQ(std::get<api::PutDrive>(*wb).value.disk.cache, CacheMode::kWriteback);
  EXPECT_EQ(std::get<api::PutDrive>(*wb).value.disk.engine, IoEngineKind::kIoUring);
  auto tern_names = parse(R"(, "cache_type": "directsync", "io_engine": "threads")");
  ASSERT_TRUE(tern_names) << tern_names.error().body;
  EXPECT_EQ(std::get<api::PutDrive>(*tern_names).value.disk.cache, CacheMode::kDirectSync);
  EXPECT_NE(fault(parse(R"(, "cache_type": "Sometimes")")).find("cache_type"), std::string::npos);
  EXPECT_NE(fault(parse(R"(, "io_engine": "Fast")")).find("io_engine"), std::string::npos);
  EXPECT_NE(fault(parse(R"(, "rate_limiter": {"bandwidth": {"size": 1, "refill_time": 1}})"))
                .find("rate_limiter"),
            std::string::npos);
  EXPECT_NE(
      fault(parse_api_request(
                "PUT", "/drives/other",
                R"({"drive_id": "d1", "path_on_host": "/proc/self/exe", "is_root_device": false})"))
          .find("does not match"),
      std::string::npos);
}

// tern extension "memory_backend" in PUT/PATCH /machine-config and PUT /snapshot/load.
TEST(ApiParser, MemoryBackendExtension) {
  auto put =
      parse_api_request("PUT", "/machine-config",
                        R"({"vcpu_count": 1, "mem_size_mib": 128, "memory_backend": "memfd"})");
  ASSERT_TRUE(put) << put.error().body;
  const MachineConfig& m = std::get<api::PutMachineConfig>(*put).value;
  EXPECT_EQ(m.memory_backend, MemoryBackend::kMemfd);
  EXPECT_EQ(to_json(m)["memory_backend"], "memfd");
  auto plain =
      parse_api_request("PUT", "/machine-config", R"({"vcpu_count": 1, "mem_size_mib": 128})");
  ASSERT_TRUE(plain);
  EXPECT_FALSE(std::get<api::PutMachineConfig>(*plain).value.memory_backend);
  EXPECT_FALSE(to_json(std::get<api::PutMachineConfig>(*plain).value).contains("memory_backend"));
  auto patch = parse_api_request("PATCH", "/machine-config", R"({"memory_backend": "hugetlbfs"})");
  ASSERT_TRUE(patch) << patch.error().body;
  EXPECT_EQ(std::get<api::PatchMachineConfig>(*patch).value.memory_backend,
            MemoryBackend::kHugetlbfs);
  EXPECT_EQ(fault(parse_api_request(
                "PUT", "/machine-config",
                R"({"vcpu_count": 1, "mem_size_mib": 128, "memory_backend": "shm"})")),
            "memory_backend: \"shm\": unknown backend (anon, memfd, hugetlbfs)");
  EXPECT_EQ(fault(parse_api_request("PATCH", "/machine-config", R"({"memory_backend": 1})")),
            "memory_backend: expected a string, got integer");
  auto load = parse_api_request("PUT", "/snapshot/load", R"({"snapshot_path": "/proc/self/exe",
            "mem_backend": {"backend_path": "/proc/self/exe", "backend_type": "File"},
            "memory_backend": "memfd"})");
  ASSERT_TRUE(load) << load.error().body;
  EXPECT_EQ(std::get<api::LoadSnapshot>(*load).value.memory_backend, MemoryBackend::kMemfd);
  EXPECT_EQ(fault(parse_api_request("PUT", "/snapshot/load", R"({"snapshot_path": "/proc/self/exe",
            "mem_file_path": "/proc/self/exe", "memory_backend": "x"})")),
            "memory_backend: \"x\": unknown backend (anon, memfd, hugetlbfs)");
}

// Firecracker's "huge_pages": "2M" is tern's hugetlbfs backend; other values refused by name.
TEST(ApiParser, HugePages2M) {
  auto put = parse_api_request("PUT", "/machine-config",
                               R"({"vcpu_count": 1, "mem_size_mib": 128, "huge_pages": "2M"})");
  ASSERT_TRUE(put) << put.error().body;
  const MachineConfig& m = std::get<api::PutMachineConfig>(*put).value;
  EXPECT_EQ(m.huge_pages, "2M");
  EXPECT_EQ(to_json(m)["huge_pages"], "2M");
  EXPECT_TRUE(parse_api_request(
      "PUT", "/machine-config",
      R"({"vcpu_count": 1, "mem_size_mib": 128, "huge_pages": "2M", "memory_backend": "hugetlbfs"})"));
  EXPECT_EQ(fault(parse_api_request("PUT", "/machine-config",
                                    R"({"vcpu_count": 1, "mem_size_mib": 129, "huge_pages": "2M"})")),
            "huge_pages: \"2M\": mem_size_mib 129 is not a multiple of 2 (2 MiB pages)");
  EXPECT_EQ(fault(parse_api_request(
                "PUT", "/machine-config",
                R"({"vcpu_count": 1, "mem_size_mib": 128, "huge_pages": "2M", "memory_backend": "memfd"})")),
            "huge_pages: \"2M\" is 2 MiB hugetlbfs RAM; memory_backend \"memfd\" contradicts it");
  EXPECT_EQ(fault(parse_api_request("PUT", "/machine-config",
                                    R"({"vcpu_count": 1, "mem_size_mib": 128, "huge_pages": "1G"})")),
            "huge_pages: \"1G\": unknown value (None, Transparent, 2M)");
  EXPECT_NE(fault(parse_api_request(
                      "PUT", "/machine-config",
                      R"({"vcpu_count": 1, "mem_size_mib": 128, "huge_pages": "Transparent"})"))
                .find("huge_pages: \"Transparent\": not supported"),
            std::string::npos);
  EXPECT_TRUE(parse_api_request("PATCH", "/machine-config", R"({"huge_pages": "2M"})"));
}

// tern extension "cpu_affinity" of machine-config and snapshot/load: an object of cpulists by
// thread class, rendered back; bad ones refused naming the field and the class.
TEST(ApiParser, CpuAffinityExtension) {
  auto put = parse_api_request(
      "PUT", "/machine-config",
      R"({"vcpu_count": 2, "mem_size_mib": 128, "cpu_affinity": {"vcpu0": "0-1", "vcpu1": "1", "io": "0"}})");
  ASSERT_TRUE(put) << put.error().body;
  const MachineConfig& m = std::get<api::PutMachineConfig>(*put).value;
  EXPECT_EQ(m.cpu_affinity.vcpu.at(0), (CpuList{0, 1}));
  EXPECT_EQ(m.cpu_affinity.io, (CpuList{0}));
  EXPECT_EQ(to_json(m)["cpu_affinity"],
            nlohmann::json({{"vcpu0", "0-1"}, {"vcpu1", "1"}, {"io", "0"}}));
  EXPECT_FALSE(to_json(MachineConfig{}).contains("cpu_affinity"));
  auto bad = [](const std::string& affinity) {
    return fault(parse_api_request(
        "PUT", "/machine-config",
        R"({"vcpu_count": 1, "mem_size_mib": 128, "cpu_affinity": )" + affinity + "}"));
  };
  EXPECT_EQ(bad(R"("0-1")"), "cpu_affinity: expected an object like {\"vcpu0\": \"0-1\", "
                             "\"io\": \"0\"}, got string");
  EXPECT_EQ(bad(R"({"vcpu0": 1})"), "cpu_affinity vcpu0: expected a CPU list string, got integer");
  EXPECT_EQ(bad(R"({"vcpu0": "1-0"})"), "cpu_affinity vcpu0: \"1-0\": a range ends below its start");
  EXPECT_EQ(bad(R"({"net": "1"})"), "cpu_affinity net: unknown thread class (vcpu, vcpuN, io)");
  auto load = parse_api_request("PUT", "/snapshot/load", R"({"snapshot_path": "/proc/self/exe",
            "mem_backend": {"backend_path": "/proc/self/exe", "backend_type": "File"},
            "cpu_affinity": {"vcpu": "0"}})");
  ASSERT_TRUE(load) << load.error().body;
  EXPECT_EQ(std::get<api::LoadSnapshot>(*load).value.cpu_affinity.vcpus, (CpuList{0}));
}

// Firecracker's vhost-user-block drive: "socket" instead of path_on_host; the back-end's
// fields are refused by name.
TEST(ApiParser, VhostUserDrive) {
  auto parse = [](const std::string& fields) {
    return parse_api_request("PUT", "/drives/vu",
                             R"({"drive_id": "vu", "is_root_device": true, )" + fields + "}");
  };
  auto ok = parse(R"("socket": "/tmp/vu.sock")");
  ASSERT_TRUE(ok) << ok.error().body;
  const DriveSpec& d = std::get<api::PutDrive>(*ok).value;
  EXPECT_EQ(d.disk.vhost_user_socket, "/tmp/vu.sock");
  EXPECT_TRUE(d.disk.path.empty());
  EXPECT_TRUE(d.is_root_device);
  EXPECT_EQ(d.disk.queues, 1);
  EXPECT_TRUE(validate_disk_config(d.disk));  // the back-end's fields at their defaults

  auto mq = parse(
      R"("socket": "/tmp/vu.sock", "queues": 2, "queue_size": 512, "is_read_only": false, "partuuid": "abc")");
  ASSERT_TRUE(mq) << mq.error().body;
  EXPECT_EQ(std::get<api::PutDrive>(*mq).value.disk.queues, 2);
  EXPECT_EQ(std::get<api::PutDrive>(*mq).value.disk.queue_size, 512);
  EXPECT_EQ(std::get<api::PutDrive>(*mq).value.partuuid, "abc");

  auto refused = [&](const std::string& extra, const std::string& field) {
    std::string f = fault(parse(R"("socket": "/tmp/vu.sock", )" + extra));
    EXPECT_TRUE(f.starts_with(field + ": ")) << f;
    EXPECT_NE(f.find("back-end"), std::string::npos) << f;
  };
  refused(R"("path_on_host": "/proc/self/exe")", "path_on_host");
  refused(R"("is_read_only": true)", "is_read_only");
  refused(R"("cache_type": "Unsafe")", "cache_type");
  refused(R"("io_engine": "Sync")", "io_engine");
  refused(R"("locking": false)", "locking");
  refused(R"("kick_suppress": true)", "kick_suppress");
  refused(R"("coalesce_us": 5)", "coalesce_us");
  refused(R"("poll_us": 5)", "poll_us");
  refused(R"("rate_limiter": {"bandwidth": {"size": 1, "refill_time": 1}})", "rate_limiter");
  EXPECT_EQ(fault(parse(R"("socket": "")")), "socket: empty path");
  EXPECT_NE(fault(parse(R"("socket": ")" + std::string(108, 's') + "\"")).find("socket: longer"),
            std::string::npos);
  EXPECT_EQ(fault(parse(R"("socket": 1)")), "socket: expected a string, got integer");
  EXPECT_EQ(fault(parse(R"("socket": "/tmp/vu.sock", "queues": 0)")),
            "queues: 0 is out of range (1..64)");
  EXPECT_EQ(fault(parse(R"("socket": "/tmp/vu.sock", "queue_size": 100)")),
            "queue_size: 100 is not a power of two");
  EXPECT_EQ(fault(parse(R"("socket": "/tmp/vu.sock", "sockets": 1)")), "sockets: unknown field");
  // A plain drive still needs its image.
  EXPECT_EQ(fault(parse(R"("is_read_only": false)")), "path_on_host: missing required field");
}

// GET /vm/config renders a drive as parse_drive reads it: a vhost-user drive without the
// back-end's fields, tern's queue extensions only when not at their defaults.
// A relative path_on_host is resolved against tern's directory once, when the drive is put:
// GET /vm/config shows the absolute path, and a snapshot of the VM names it (issue 31 item 13).
TEST(ApiParser, RelativeDrivePathIsKeptAbsolute) {
  testing::TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string image = std::filesystem::canonical(dir.path()).string() + "/rootfs.ext4";
  { std::ofstream(image) << "x"; }
  testing::ScopedWorkingDirectory in(dir.path());
  auto d = parse_drive(nlohmann::json::parse(R"({"drive_id": "rootfs", "is_root_device": true,
                                                 "path_on_host": "./rootfs.ext4"})"),
                       "drive");
  ASSERT_TRUE(d) << d.error().message();
  EXPECT_EQ(d->disk.path, image);
  EXPECT_EQ(to_json(*d)["path_on_host"], image);
}

TEST(ApiParser, RelativeVhostUserSocketIsKeptAbsolute) {
  testing::TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string cwd = std::filesystem::canonical(dir.path()).string();
  testing::ScopedWorkingDirectory in(dir.path());
  auto d = parse_drive(
      nlohmann::json::parse(R"({"drive_id": "vu", "is_root_device": false, "socket": "blk.sock"})"),
      "drive");
  ASSERT_TRUE(d) << d.error().message();
  EXPECT_EQ(d->disk.vhost_user_socket, cwd + "/blk.sock");
  EXPECT_EQ(to_json(*d)["socket"], cwd + "/blk.sock");
}

TEST(ApiParser, DriveJsonRoundTrip) {
  auto vu = parse_drive(
      nlohmann::json::parse(
          R"({"drive_id": "vu", "is_root_device": false, "socket": "/s", "queues": 2})"),
      "");
  ASSERT_TRUE(vu) << vu.error().message();
  nlohmann::json j = to_json(*vu);
  EXPECT_EQ(j, nlohmann::json::parse(
                   R"({"drive_id": "vu", "is_root_device": false, "socket": "/s", "queues": 2})"))
      << j.dump();
  auto back = parse_drive(j, "");
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(back->disk.vhost_user_socket, "/s");
  EXPECT_EQ(back->disk.queues, 2);

  auto plain = parse_drive(nlohmann::json::parse(R"({"drive_id": "d", "is_root_device": true,
      "path_on_host": "/proc/self/exe", "queue_size": 64})"),
                           "");
  ASSERT_TRUE(plain) << plain.error().message();
  nlohmann::json pj = to_json(*plain);
  EXPECT_FALSE(pj.contains("socket")) << pj.dump();
  EXPECT_FALSE(pj.contains("queues")) << pj.dump();
  EXPECT_EQ(pj["queue_size"], 64);
  EXPECT_EQ(pj["path_on_host"], kFile);
  EXPECT_EQ(pj["cache_type"], "Unsafe");
  auto plain_back = parse_drive(pj, "");
  ASSERT_TRUE(plain_back) << plain_back.error().message();
  EXPECT_EQ(plain_back->disk.queue_size, 64);
}

// tern's "interface" extension: an NVMe drive takes Firecracker's image fields; the virtio-only
// ones are refused by name; GET /vm/config renders "interface" only for an NVMe drive.
TEST(ApiParser, NvmeDrive) {
  auto parse = [](const std::string& fields) {
    return parse_api_request(
        "PUT", "/drives/n0",
        R"({"drive_id": "n0", "is_root_device": false, "path_on_host": "/proc/self/exe", )" +
            fields + "}");
  };
  auto ok = parse(
      R"("interface": "nvme", "is_read_only": true, "cache_type": "none", "io_engine": "Async")");
  ASSERT_TRUE(ok) << ok.error().body;
  const DriveSpec& d = std::get<api::PutDrive>(*ok).value;
  EXPECT_EQ(d.disk.interface, DiskInterface::kNvme);
  EXPECT_TRUE(d.disk.read_only);
  EXPECT_EQ(d.disk.cache, CacheMode::kNone);
  EXPECT_EQ(d.disk.engine, IoEngineKind::kIoUring);
  EXPECT_TRUE(validate_disk_config(d.disk));
  nlohmann::json j = to_json(d);
  EXPECT_EQ(j["interface"], "nvme") << j.dump();
  auto back = parse_drive(j, "");
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(back->disk.interface, DiskInterface::kNvme);
  EXPECT_EQ(to_json(*back), j);

  auto virtio = parse(R"("interface": "virtio")");
  ASSERT_TRUE(virtio) << virtio.error().body;
  EXPECT_EQ(std::get<api::PutDrive>(*virtio).value.disk.interface, DiskInterface::kVirtio);
  // Firecracker-compatible output: no "interface" for a virtio drive.
  EXPECT_FALSE(to_json(std::get<api::PutDrive>(*virtio).value).contains("interface"));

  EXPECT_EQ(fault(parse(R"("interface": "scsi")")),
            "interface: \"scsi\": unknown disk interface (virtio, nvme)");
  EXPECT_EQ(fault(parse(R"("interface": 1)")), "interface: expected a string, got integer");
  EXPECT_TRUE(fault(parse(R"("interface": "nvme", "queues": 1)"))
                  .starts_with("queues: not with interface \"nvme\""));
  EXPECT_TRUE(fault(parse(R"("interface": "nvme", "queue_size": 64)"))
                  .starts_with("queue_size: not with interface \"nvme\""));
  EXPECT_TRUE(
      fault(
          parse_api_request(
              "PUT", "/drives/n0",
              R"({"drive_id": "n0", "is_root_device": false, "interface": "nvme", "socket": "/s"})"))
          .starts_with("socket: not with interface \"nvme\""));
}

// tern's notification tuning extensions ("kick_suppress", "coalesce_us", "poll_us": --disk's
// keys); rendered by GET /vm/config only when not the default; refused for NVMe by name.
TEST(ApiParser, DriveNotifyTuning) {
  auto parse = [](const std::string& fields) {
    return parse_api_request(
        "PUT", "/drives/d0",
        R"({"drive_id": "d0", "is_root_device": true, "path_on_host": "/proc/self/exe")" + fields +
            "}");
  };
  auto r = parse(R"(, "kick_suppress": true, "coalesce_us": 40, "poll_us": 0)");
  ASSERT_TRUE(r) << r.error().body;
  const auto& d = std::get<api::PutDrive>(*r).value;
  EXPECT_TRUE(d.disk.kick_suppress);
  EXPECT_EQ(d.disk.coalesce_us, 40u);
  nlohmann::json j = to_json(d);
  EXPECT_EQ(j["coalesce_us"], 40) << j.dump();
  EXPECT_FALSE(j.contains("poll_us")) << j.dump();
  auto back = parse_drive(j, "");
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(back->disk.coalesce_us, 40u);
  EXPECT_EQ(back->disk.kick_suppress, d.disk.kick_suppress);
  auto refusal = [&](const std::string& fields) {
    auto e = parse(fields);
    return e ? std::string("(ok)") : e.error().body;
  };
  EXPECT_NE(refusal(R"(, "coalesce_us": 10001)").find("coalesce_us"), std::string::npos);
  EXPECT_NE(refusal(R"(, "poll_us": -1)").find("poll_us"), std::string::npos);
  // (The fault message is a JSON string: its quotes are escaped.)
  EXPECT_NE(refusal(R"(, "kick_suppress": "yes")")
                .find(R"(kick_suppress: expected true, false, \"on\" or \"off\", got \"yes\")"),
            std::string::npos);
  EXPECT_NE(refusal(R"(, "kick_suppress": 1)").find("kick_suppress"), std::string::npos);
  // A string is shown escaped (a NUL does not cut it to an accepted value) and at most 64 bytes.
  EXPECT_NE(refusal(R"(, "kick_suppress": "on\u0000x")").find(R"(got \"on\\u0000x\")"),
            std::string::npos)
      << refusal(R"(, "kick_suppress": "on\u0000x")");
  EXPECT_LT(refusal(R"(, "kick_suppress": ")" + std::string(5000, 'a') + "\"").size(), 300u);
  EXPECT_NE(refusal(R"(, "interface": "nvme", "poll_us": 1)").find("poll_us"), std::string::npos);
  // As --disk spells it, and as "locking" takes it: "on" / "off" too.
  for (auto [text, want] : {std::pair{R"("off")", false}, std::pair{R"("on")", true}}) {
    auto s = parse(std::string(R"(, "kick_suppress": )") + text);
    ASSERT_TRUE(s) << s.error().body;
    EXPECT_EQ(std::get<api::PutDrive>(*s).value.disk.kick_suppress, want) << text;
  }
}

// tern's "format" ("raw" | "qcow2"; absent: probed) and "backing_files" extensions; GET
// /vm/config renders them only when given.
TEST(ApiParser, DriveFormatAndBackingFiles) {
  auto parse = [](const std::string& fields) {
    return parse_api_request(
        "PUT", "/drives/d0",
        R"({"drive_id": "d0", "is_root_device": true, "path_on_host": "/proc/self/exe")" + fields +
            "}");
  };
  auto plain = parse("");
  ASSERT_TRUE(plain);
  nlohmann::json pj = to_json(std::get<api::PutDrive>(*plain).value);
  EXPECT_FALSE(pj.contains("format") || pj.contains("backing_files")) << pj.dump();
  auto q = parse(R"(, "format": "qcow2", "backing_files": true)");
  ASSERT_TRUE(q) << q.error().body;
  const DiskConfig& d = std::get<api::PutDrive>(*q).value.disk;
  EXPECT_EQ(d.format, DiskFormat::kQcow2);
  EXPECT_TRUE(d.backing_files);
  nlohmann::json j = to_json(std::get<api::PutDrive>(*q).value);
  EXPECT_EQ(j["format"], "qcow2") << j.dump();
  EXPECT_EQ(j["backing_files"], true) << j.dump();
  EXPECT_EQ(fault(parse(R"(, "format": "vmdk")")),
            "format: \"vmdk\": unknown image format (raw, qcow2)");
}

// tern's "locking" extension (QEMU's locking=): true/"on" (default) or false/"off"; GET
// /vm/config renders it only when off (a default drive stays Firecracker's Drive).
TEST(ApiParser, DriveLocking) {
  auto parse = [](const std::string& fields) {
    return parse_api_request(
        "PUT", "/drives/d0",
        R"({"drive_id": "d0", "is_root_device": true, "path_on_host": "/proc/self/exe")" + fields +
            "}");
  };
  auto locking = [&](const std::string& fields) {
    auto r = parse(fields);
    EXPECT_TRUE(r) << fields;
    return r && std::get<api::PutDrive>(*r).value.disk.locking;
  };
  EXPECT_TRUE(locking(""));
  EXPECT_TRUE(locking(R"(, "locking": true)"));
  EXPECT_TRUE(locking(R"(, "locking": "on")"));
  EXPECT_TRUE(locking(R"(, "locking": null)"));
  EXPECT_FALSE(locking(R"(, "locking": false)"));
  EXPECT_FALSE(locking(R"(, "locking": "off")"));
  EXPECT_FALSE(locking(R"(, "interface": "nvme", "locking": "off")"));

  auto on = parse("");
  EXPECT_FALSE(to_json(std::get<api::PutDrive>(*on).value).contains("locking"));
  auto off = parse(R"(, "locking": "off")");
  nlohmann::json j = to_json(std::get<api::PutDrive>(*off).value);
  EXPECT_EQ(j["locking"], false) << j.dump();
  auto back = parse_drive(j, "");
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_FALSE(back->disk.locking);

  EXPECT_EQ(fault(parse(R"(, "locking": "no")")),
            "locking: expected true, false, \"on\" or \"off\", got \"no\"");
  EXPECT_EQ(fault(parse(R"(, "locking": 0)")),
            "locking: expected true, false, \"on\" or \"off\", got integer");
}

TEST(ApiParser, ErrorsNameTheField) {
  EXPECT_EQ(fault(parse_api_request("PUT", "/machine-config",
                                    R"({"vcpu_count": "2", "mem_size_mib": 1})")),
            "vcpu_count: expected an integer, got string");
  EXPECT_EQ(fault(parse_api_request("PUT", "/machine-config", R"({"vcpu_count": 2})")),
            "mem_size_mib: missing required field");
  EXPECT_EQ(fault(parse_api_request("PUT", "/machine-config",
                                    R"({"vcpu_count": 2, "mem_size_mib": 128, "vcpus": 3})")),
            "vcpus: unknown field");
  EXPECT_EQ(
      fault(parse_api_request("PUT", "/machine-config", R"({"vcpu_count": 0, "mem_size_mib": 1})")),
      "vcpu_count: 0 is out of range (1..254)");
  EXPECT_EQ(fault(parse_api_request("PUT", "/machine-config",
                                    R"({"vcpu_count": -1, "mem_size_mib": 1})")),
            "vcpu_count: -1 is out of range (1..254)");
  EXPECT_EQ(fault(parse_api_request("PUT", "/machine-config",
                                    R"({"vcpu_count": 1, "mem_size_mib": 128, "smt": true})")),
            "smt: true: SMT is not supported by tern");
  EXPECT_NE(
      fault(parse_api_request("PUT", "/boot-source", R"({"kernel_image_path": "/nonexistent/k"})"))
          .find("kernel_image_path: /nonexistent/k: No such file"),
      std::string::npos);
  EXPECT_EQ(
      fault(parse_api_request("PUT", "/actions", R"({"action_type": "Reboot"})")),
      "action_type: \"Reboot\": unknown action (InstanceStart, SendCtrlAltDel, FlushMetrics)");
  EXPECT_EQ(fault(parse_api_request("PATCH", "/vm", R"({"state": "Running"})")),
            "state: \"Running\": unknown state (Paused, Resumed)");
  EXPECT_EQ(fault(parse_api_request("PUT", "/actions", "")),
            "body: missing: this request needs a JSON body");
  EXPECT_EQ(fault(parse_api_request("PUT", "/actions", "[1]")),
            "body: expected a JSON object, got array");
}

TEST(ApiParser, SnapshotBodiesInFirecrackersShape) {
  auto create = parse_api_request("PUT", "/snapshot/create", R"({
            "snapshot_type": "Full",
            "snapshot_path": "/tmp/snapshot_file",
            "mem_file_path": "/tmp/mem_file"
        })");
  ASSERT_TRUE(create) << create.error().body;
  const auto& c = std::get<api::CreateSnapshot>(*create).value;
  EXPECT_EQ(c.snapshot_path, "/tmp/snapshot_file");
  EXPECT_EQ(c.mem_file_path, "/tmp/mem_file");
  EXPECT_EQ(c.rate_limit_bytes_per_s, 0u);
  auto load = parse_api_request("PUT", "/snapshot/load", R"({
            "snapshot_path": "/proc/self/exe",
            "mem_backend": {"backend_path": "/proc/self/exe", "backend_type": "File"},
            "enable_diff_snapshots": false,
            "resume_vm": true
        })");
  ASSERT_TRUE(load) << load.error().body;
  EXPECT_TRUE(std::get<api::LoadSnapshot>(*load).value.resume_vm);
  EXPECT_EQ(std::get<api::LoadSnapshot>(*load).value.mem_file_path, "/proc/self/exe");

  EXPECT_EQ(
      fault(parse_api_request(
          "PUT", "/snapshot/create",
          R"({"snapshot_type": "Diff", "snapshot_path": "/tmp/s", "mem_file_path": "/tmp/m"})")),
      "snapshot_type: \"Diff\": diff snapshots are not supported by tern");
  EXPECT_EQ(fault(parse_api_request("PUT", "/snapshot/create", R"({"snapshot_path": "/tmp/s"})")),
            "mem_file_path: missing required field");
  EXPECT_NE(
      fault(parse_api_request("PUT", "/snapshot/create",
                              R"({"snapshot_path": "/nonexistent/s", "mem_file_path": "/tmp/m"})"))
          .find("snapshot_path: /nonexistent: No such file"),
      std::string::npos);
  EXPECT_EQ(
      fault(parse_api_request(
          "PUT", "/snapshot/load",
          R"({"snapshot_path": "/proc/self/exe", "mem_backend": {"backend_type": "Uffd", "backend_path": "/x"}})")),
      "mem_backend.backend_type: \"Uffd\": userfaultfd backends are not supported by tern (tern "
      "maps the file copy-on-write)");
  EXPECT_NE(fault(parse_api_request(
                      "PUT", "/snapshot/load",
                      R"({"snapshot_path": "/nonexistent/s", "mem_file_path": "/proc/self/exe"})"))
                .find("snapshot_path: /nonexistent/s: No such file"),
            std::string::npos);
  EXPECT_EQ(
      fault(parse_api_request("PUT", "/snapshot/load", R"({"snapshot_path": "/proc/self/exe"})")),
      "mem_backend: missing: give mem_backend {backend_type: File, backend_path}");
}

TEST(ApiParser, MalformedJson) {
  EXPECT_NE(
      fault(parse_api_request("PUT", "/actions", R"({"action_type": "Inst)")).find("JSON body"),
      std::string::npos);
  std::string deep(10000, '[');
  EXPECT_NE(fault(parse_api_request("PUT", "/actions", deep)).find("nested deeper than 32"),
            std::string::npos);
  std::string bad_utf8 = "{\"action_type\": \"\xff\xfe\"}";
  auto r = parse_api_request("PUT", "/actions", bad_utf8);
  EXPECT_NE(fault(r).find("JSON body"), std::string::npos);
  // The error body itself is valid JSON even when it quotes the bad bytes.
  EXPECT_TRUE(nlohmann::json::accept(r.error().body));
}

// nlohmann keeps the last of duplicate keys: {"state": "Paused", "state": "Resumed"} resumed the
// VM, while anything reading the first key saw a pause. Refused now, naming the key, at any depth.
TEST(ApiParser, DuplicateKeysAreRefused) {
  EXPECT_EQ(fault(parse_api_request("PATCH", "/vm", R"({"state": "Paused", "state": "Resumed"})")),
            "JSON body: duplicate key \"state\"");
  EXPECT_EQ(fault(parse_api_request("PUT", "/snapshot/load",
                                    R"({"snapshot_path": "/proc/self/exe", "mem_backend":
                                        {"backend_type": "File", "backend_path": "/a",
                                         "backend_path": "/proc/self/exe"}})")),
            "JSON body: duplicate key \"backend_path\"");
  // The same key in sibling or nested objects, or as a value, is fine.
  auto ok = parse_json_text(R"({"a": {"x": 1}, "b": [{"x": 2}, {"x": 3}], "x": "x"})");
  ASSERT_TRUE(ok) << ok.error().message();
  EXPECT_EQ((*ok)["b"][1]["x"], 3);
  EXPECT_FALSE(parse_json_text(R"({"a": [{"x": 1, "x": 2}]})"));
  EXPECT_TRUE(parse_api_request("PATCH", "/vm", R"({"state": "Paused"})").has_value());
}

// PUT /network-interfaces/{iface_id}: Firecracker's NetworkInterface body plus tern's queues,
// vhost, mtu (the keyed surface of NetKind).
TEST(ApiParser, NetworkInterface) {
  auto r = parse_api_request("PUT", "/network-interfaces/eth0",
                             R"({"iface_id": "eth0", "host_dev_name": "tap0",
                                 "guest_mac": "02:FC:00:00:00:05", "queues": 2, "vhost": true,
                                 "mtu": 9000})");
  ASSERT_TRUE(r) << r.error().body;
  const auto& put = std::get<api::PutKeyedDevice>(*r);
  EXPECT_EQ(put.path, "/network-interfaces");
  EXPECT_EQ(put.id, "eth0");
  const NetConfig& c = std::any_cast<const NetConfig&>(put.spec);
  EXPECT_EQ(c.iface_id, "eth0");
  EXPECT_EQ(c.host_dev_name, "tap0");
  EXPECT_EQ(c.guest_mac, (MacAddress{0x02, 0xfc, 0, 0, 0, 5}));
  EXPECT_EQ(c.queue_pairs, 2);
  EXPECT_TRUE(c.vhost);
  EXPECT_EQ(c.mtu, 9000);
  // Firecracker's minimal body; null rate limiters are absent.
  auto min = parse_api_request("PUT", "/network-interfaces/eth1",
                               R"({"iface_id": "eth1", "host_dev_name": "tap1",
                                   "rx_rate_limiter": null, "tx_rate_limiter": null})");
  ASSERT_TRUE(min) << min.error().body;
  const NetConfig& m = std::any_cast<const NetConfig&>(std::get<api::PutKeyedDevice>(*min).spec);
  EXPECT_FALSE(m.guest_mac);
  EXPECT_EQ(m.queue_pairs, 1);
  EXPECT_FALSE(m.vhost);
  EXPECT_FALSE(m.mtu);
}

TEST(ApiParser, NetworkInterfaceBadFields) {
  auto put = [](const char* body) {
    return fault(parse_api_request("PUT", "/network-interfaces/eth0", body));
  };
  EXPECT_EQ(put(R"({"iface_id": "eth1", "host_dev_name": "tap0"})"),
            "iface_id: \"eth1\" does not match the id in the path (\"eth0\")");
  EXPECT_EQ(put(R"({"host_dev_name": "tap0"})"), "iface_id: missing required field");
  EXPECT_EQ(put(R"({"iface_id": "eth0"})"), "host_dev_name: missing required field");
  EXPECT_EQ(put(R"({"iface_id": "eth0", "host_dev_name": "a-very-long-tap-name"})"),
            "host_dev_name: 20 bytes: a Linux interface name is at most 15 (IFNAMSIZ - 1)");
  EXPECT_EQ(put(R"({"iface_id": "eth0", "host_dev_name": "tap/0"})"),
            "host_dev_name: must not contain '/'");
  EXPECT_EQ(put(R"({"iface_id": "eth0", "host_dev_name": "tap0", "guest_mac": "02:00:00:00:00"})"),
            "guest_mac: \"02:00:00:00:00\" is not a MAC address (aa:bb:cc:dd:ee:ff)");
  EXPECT_EQ(
      put(R"({"iface_id": "eth0", "host_dev_name": "tap0", "guest_mac": "ff:ff:ff:ff:ff:ff"})"),
      "guest_mac: ff:ff:ff:ff:ff:ff: a multicast address (the first byte is odd)");
  EXPECT_EQ(put(R"({"iface_id": "eth0", "host_dev_name": "tap0", "queues": 0})"),
            "queues: 0 is out of range (1..254)");
  EXPECT_EQ(put(R"({"iface_id": "eth0", "host_dev_name": "tap0", "mtu": 67})"),
            "mtu: 67 is out of range (68..65535)");
  EXPECT_EQ(put(R"({"iface_id": "eth0", "host_dev_name": "tap0", "vhost": "on"})"),
            "vhost: expected true or false, got string");
  EXPECT_EQ(put(R"({"iface_id": "eth0", "host_dev_name": "tap0",
                    "rx_rate_limiter": {"bandwidth": {"size": 1, "refill_time": 1}}})"),
            "rx_rate_limiter: not supported by tern");
  EXPECT_EQ(put(R"({"iface_id": "eth0", "host_dev_name": "tap0", "tx_rate_limiter": {}})"),
            "tx_rate_limiter: not supported by tern");
  EXPECT_EQ(put(R"({"iface_id": "eth0", "host_dev_name": "tap0", "speed": 1})"),
            "speed: unknown field");
  EXPECT_EQ(put(""), "body: missing: this request needs a JSON body");
}

// PATCH /network-interfaces/{iface_id}: Firecracker patches the rate limiters; tern takes a body
// with only the id (a no-op) and refuses them by name.
TEST(ApiParser, NetworkInterfacePatch) {
  auto r = parse_api_request("PATCH", "/network-interfaces/eth0", R"({"iface_id": "eth0"})");
  ASSERT_TRUE(r) << r.error().body;
  EXPECT_EQ(std::get<api::PatchKeyedDevice>(*r).id, "eth0");
  auto patch = [](const char* body) {
    return fault(parse_api_request("PATCH", "/network-interfaces/eth0", body));
  };
  EXPECT_EQ(patch(R"({"iface_id": "eth0", "rx_rate_limiter": {}})"),
            "rx_rate_limiter: not supported by tern");
  EXPECT_EQ(patch(R"({"iface_id": "eth0", "tx_rate_limiter": {}})"),
            "tx_rate_limiter: not supported by tern");
  EXPECT_EQ(patch(R"({"iface_id": "eth0", "host_dev_name": "tap1"})"),
            "host_dev_name: cannot be changed by PATCH (PUT /network-interfaces/eth0 before the "
            "VM starts)");
  EXPECT_EQ(patch(R"({"iface_id": "eth0", "colour": 1})"), "colour: unknown field");
  EXPECT_EQ(patch(R"({})"), "iface_id: missing required field");
  EXPECT_EQ(patch(R"({"iface_id": "eth1"})"),
            "iface_id: \"eth1\" does not match the id in the path (\"eth0\")");
}

TEST(ApiParser, PathsAndMethods) {
  EXPECT_EQ(fault(parse_api_request("GET", "/nope", "")),
            "Invalid request method and/or path: GET /nope");
  EXPECT_EQ(fault(parse_api_request("DELETE", "/machine-config", "")),
            "Invalid request method and/or path: DELETE /machine-config");
  EXPECT_EQ(fault(parse_api_request("PUT", "/balloon", "{}")),
            "PUT /balloon: this Firecracker endpoint is not supported by tern");
  EXPECT_EQ(fault(parse_api_request("PUT", "/pmem/p0", "{}")),
            "PUT /pmem/p0: this Firecracker endpoint is not supported by tern");
  EXPECT_EQ(fault(parse_api_request("GET", "/network-interfaces/eth0", "")),
            "Invalid request method and/or path: GET /network-interfaces/eth0");
  EXPECT_EQ(fault(parse_api_request("PUT", "/network-interfaces", "{}")),
            "Invalid request method and/or path: PUT /network-interfaces");
  EXPECT_EQ(fault(parse_api_request("GET", "foo", "")),
            "request target \"foo\" must start with '/'");
  EXPECT_TRUE(parse_api_request("GET", "/machine-config?x=1", ""));
  EXPECT_TRUE(
      std::holds_alternative<api::PowerOff>(*parse_api_request("PUT", "/tern/power-off", "")));
  EXPECT_TRUE(
      std::holds_alternative<api::GetEvents>(*parse_api_request("GET", "/tern/events", "")));
}

}  // namespace
}  // namespace tern
