// Unit tests: the API request parser accepts the bodies Firecracker's documentation uses and names
// the field in every rejection (boot-source: api_parser_boot_source_test.cc; drives:
// api_parser_drive_test.cc).
#include "api/api_parser.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "api/json_reader.h"
#include "api/testing/parser_fault.h"
#include "virtio/net/net_config.h"

namespace tern {
namespace {

using testing::kReadableFile;
const std::string& kFile = kReadableFile;
std::string fault(const tl::expected<ApiRequest, ApiResponse>& r) { return testing::parse_fault(r); }

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
