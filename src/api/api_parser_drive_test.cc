// Unit tests: PUT /drives in the API request parser: cache/engine mapping, the memory backend,
// vhost-user, NVMe, notification tuning, format/backing_files and locking, paths kept absolute.
#include "api/api_parser.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "api/testing/parser_fault.h"
#include "base/testing/temp_dir.h"

namespace tern {
namespace {

using testing::kReadableFile;
const std::string& kFile = kReadableFile;
std::string fault(const tl::expected<ApiRequest, ApiResponse>& r) { return testing::parse_fault(r); }

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

}  // namespace
}  // namespace tern
