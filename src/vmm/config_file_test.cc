// Unit tests: --config-file accepts Firecracker's config-file shape and names bad fields.
#include "vmm/config_file.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace tern {
namespace {

// Firecracker's tests/framework/vm_config.json with tern-readable paths.
constexpr const char* kFirecrackerShape = R"({
  "boot-source": {
    "kernel_image_path": "/proc/self/exe",
    "boot_args": "console=ttyS0 reboot=k panic=1",
    "initrd_path": null
  },
  "drives": [
    {
      "drive_id": "rootfs",
      "partuuid": null,
      "is_root_device": true,
      "cache_type": "Unsafe",
      "is_read_only": false,
      "path_on_host": "/proc/self/exe",
      "io_engine": "Sync",
      "rate_limiter": null,
      "socket": null
    }
  ],
  "machine-config": {
    "vcpu_count": 2,
    "mem_size_mib": 1024,
    "smt": false,
    "track_dirty_pages": false,
    "huge_pages": "None"
  },
  "cpu-config": null,
  "balloon": null,
  "network-interfaces": [],
  "vsock": null,
  "logger": null,
  "metrics": null,
  "mmds-config": null,
  "entropy": null,
  "pmem": [],
  "memory-hotplug": null
})";

TEST(ConfigFile, AcceptsFirecrackerShape) {
  auto c = parse_config_file(kFirecrackerShape);
  ASSERT_TRUE(c) << c.error().message();
  EXPECT_EQ(c->boot.kernel_image_path, "/proc/self/exe");
  EXPECT_FALSE(c->boot.initrd_path);
  EXPECT_EQ(c->machine.vcpu_count, 2u);
  EXPECT_EQ(c->machine.mem_size_mib, 1024u);
  ASSERT_EQ(c->drives.size(), 1u);
  EXPECT_EQ(c->drives[0].drive_id, "rootfs");
  EXPECT_EQ(c->drives[0].disk.cache, CacheMode::kUnsafe);
}

// tern extension machine-config.memory_backend: parsed, kept through resources(), in VmConfig and
// GET /vm/config; a bad value names the field.
TEST(ConfigFile, MemoryBackend) {
  auto c = parse_config_file(R"({"boot-source": {"kernel_image_path": "/proc/self/exe"},
      "machine-config": {"vcpu_count": 1, "mem_size_mib": 128, "memory_backend": "memfd"}})");
  ASSERT_TRUE(c) << c.error().message();
  EXPECT_EQ(c->machine.memory_backend, MemoryBackend::kMemfd);
  VmResources r = c->resources();
  EXPECT_EQ(r.vm_config_json()["machine-config"]["memory_backend"], "memfd");
  auto config = r.vm_config();
  ASSERT_TRUE(config) << config.error().message();
  EXPECT_EQ(config->memory_backend, MemoryBackend::kMemfd);
  // PATCH /machine-config of another field keeps it.
  MachineConfigPatch two_cpus;
  two_cpus.vcpu_count = 2;
  ASSERT_TRUE(r.patch_machine_config(two_cpus));
  EXPECT_EQ(r.memory_backend, MemoryBackend::kMemfd);

  auto automatic = parse_config_file(R"({"boot-source": {"kernel_image_path": "/proc/self/exe"}})");
  ASSERT_TRUE(automatic);
  EXPECT_FALSE(automatic->resources().vm_config_json()["machine-config"].contains("memory_backend"));

  auto bad = parse_config_file(R"({"boot-source": {"kernel_image_path": "/proc/self/exe"},
      "machine-config": {"vcpu_count": 1, "mem_size_mib": 128, "memory_backend": "tmpfs"}})");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message(),
            "machine-config.memory_backend: \"tmpfs\": unknown backend (anon, memfd, hugetlbfs)");
}

// machine-config.huge_pages "2M": kept through resources() and GET /vm/config; the VM is built on
// hugetlbfs; too few free 2 MiB pages are refused by vm_config() (before anything is built),
// naming the field (1 TiB of RAM: no test host has 524288 free pages).
TEST(ConfigFile, HugePages2M) {
  auto c = parse_config_file(R"({"boot-source": {"kernel_image_path": "/proc/self/exe"},
      "machine-config": {"vcpu_count": 1, "mem_size_mib": 1048576, "huge_pages": "2M"}})");
  ASSERT_TRUE(c) << c.error().message();
  VmResources r = c->resources();
  EXPECT_EQ(r.vm_config_json()["machine-config"]["huge_pages"], "2M");
  EXPECT_FALSE(r.vm_config_json()["machine-config"].contains("memory_backend"));
  auto config = r.vm_config();
  ASSERT_FALSE(config);
  EXPECT_EQ(config.error().message().rfind(
                "machine-config.huge_pages: \"2M\": 524288 free 2 MiB huge pages needed", 0),
            0u)
      << config.error().message();
  r.memory_bytes = 0;  // no pages needed: the backend is all that is left to check
  auto none = r.vm_config();
  ASSERT_TRUE(none) << none.error().message();
  EXPECT_EQ(none->memory_backend, MemoryBackend::kHugetlbfs);
}

// machine-config.cpu_affinity: kept through resources() into VmConfig and GET /vm/config; a vCPU
// index the VM does not have and a CPU tern may not use are refused by vm_config(), by name.
TEST(ConfigFile, CpuAffinity) {
  auto c = parse_config_file(R"({"boot-source": {"kernel_image_path": "/proc/self/exe"},
      "machine-config": {"vcpu_count": 2, "mem_size_mib": 128, "cpu_affinity": {"vcpu1": "0"}}})");
  ASSERT_TRUE(c) << c.error().message();
  VmResources r = c->resources();
  EXPECT_EQ(r.vm_config_json()["machine-config"]["cpu_affinity"], nlohmann::json({{"vcpu1", "0"}}));
  auto config = r.vm_config();
  ASSERT_TRUE(config) << config.error().message();
  EXPECT_EQ(config->cpu_affinity.vcpu.at(1), (CpuList{0}));
  r.vcpus = 1;
  EXPECT_EQ(r.vm_config().error().message(),
            "machine-config.cpu_affinity vcpu1: the VM has 1 vCPU (vcpu0..vcpu0)");
  r.cpu_affinity = *parse_cpu_affinity("io=1023", "x");
  EXPECT_EQ(r.vm_config().error().message().rfind(
                "machine-config.cpu_affinity io: CPU 1023 is not one tern may run on", 0),
            0u);
}

// tern extension boot-source.on_reboot: parsed, kept through resources() into VmConfig and
// GET /vm/config; absent stays unset (the boot's default); a bad value names the field.
TEST(ConfigFile, OnReboot) {
  auto c = parse_config_file(R"({"boot-source": {"kernel_image_path": "/proc/self/exe",
      "on_reboot": "restart"}})");
  ASSERT_TRUE(c) << c.error().message();
  VmResources r = c->resources();
  EXPECT_EQ(r.vm_config_json()["boot-source"]["on_reboot"], "restart");
  auto config = r.vm_config();
  ASSERT_TRUE(config) << config.error().message();
  EXPECT_EQ(config->on_reboot, OnReboot::kRestart);
  auto absent = parse_config_file(R"({"boot-source": {"kernel_image_path": "/proc/self/exe"}})");
  ASSERT_TRUE(absent);
  EXPECT_FALSE(absent->resources().vm_config()->on_reboot);
  auto bad = parse_config_file(R"({"boot-source": {"kernel_image_path": "/proc/self/exe",
      "on_reboot": "poweroff"}})");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message(),
            R"(boot-source.on_reboot: "poweroff" is not one of "exit", "restart")");
}

// tern extension boot-source.boot_protocol: parsed, kept through resources() into VmConfig and
// GET /vm/config (rendered only when not "auto"); a bad value names the field.
TEST(ConfigFile, BootProtocol) {
  auto c = parse_config_file(R"({"boot-source": {"kernel_image_path": "/proc/self/exe",
      "boot_protocol": "pvh"}})");
  ASSERT_TRUE(c) << c.error().message();
  EXPECT_EQ(c->boot.boot_protocol, BootProtocol::kPvh);
  VmResources r = c->resources();
  EXPECT_EQ(r.vm_config_json()["boot-source"]["boot_protocol"], "pvh");
  auto config = r.vm_config();
  ASSERT_TRUE(config) << config.error().message();
  EXPECT_EQ(config->boot_protocol, BootProtocol::kPvh);

  auto automatic = parse_config_file(R"({"boot-source": {"kernel_image_path": "/proc/self/exe"}})");
  ASSERT_TRUE(automatic);
  EXPECT_EQ(automatic->boot.boot_protocol, BootProtocol::kAuto);
  EXPECT_FALSE(automatic->resources().vm_config_json()["boot-source"].contains("boot_protocol"));

  auto bad = parse_config_file(R"({"boot-source": {"kernel_image_path": "/proc/self/exe",
      "boot_protocol": "multiboot"}})");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message(), "boot-source.boot_protocol: \"multiboot\" is not one of "
                                   "\"auto\", \"pvh\", \"bzimage\"");
}

// Firecracker's network-interfaces array; queues over the vCPUs is refused when the VM config is
// built, naming the element.
TEST(ConfigFile, NetworkInterfaces) {
  auto c = parse_config_file(R"({"boot-source": {"kernel_image_path": "/proc/self/exe"},
      "machine-config": {"vcpu_count": 2, "mem_size_mib": 128},
      "network-interfaces": [
        {"iface_id": "eth0", "host_dev_name": "tap0", "guest_mac": "06:00:ac:10:00:02"},
        {"iface_id": "eth1", "host_dev_name": "tap1", "queues": 2, "vhost": true, "mtu": 1400}]})");
  ASSERT_TRUE(c) << c.error().message();
  VmResources r = c->resources();
  auto j = r.vm_config_json()["network-interfaces"];
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0], (nlohmann::json{{"iface_id", "eth0"}, {"host_dev_name", "tap0"},
                                  {"guest_mac", "06:00:ac:10:00:02"}, {"queues", 1},
                                  {"vhost", false}}));
  EXPECT_EQ(j[1]["iface_id"], "eth1");
  EXPECT_EQ(j[1]["queues"], 2);
  EXPECT_EQ(j[1]["mtu"], 1400);
  auto config = r.vm_config();
  ASSERT_TRUE(config) << config.error().message();
  EXPECT_EQ(config->devices.size(), 2u);
  r.vcpus = 1;
  auto over = r.vm_config();
  ASSERT_FALSE(over);
  EXPECT_EQ(over.error().message(),
            "network-interfaces[1].queues: eth1: 2 queue pairs, more than the VM's 1 vCPU");
}

// A vhost-user-block drive (Firecracker's Drive with "socket") as the root device: /dev/vda,
// root= added as for an image; GET /vm/config gives it back without the back-end's fields.
TEST(ConfigFile, VhostUserDrive) {
  auto c = parse_config_file(R"({"boot-source": {"kernel_image_path": "/proc/self/exe"},
      "machine-config": {"vcpu_count": 2, "mem_size_mib": 128},
      "drives": [
        {"drive_id": "scratch", "is_root_device": false, "path_on_host": "/proc/self/exe"},
        {"drive_id": "rootfs", "is_root_device": true, "socket": "/tmp/vu.sock", "queues": 2,
         "partuuid": null, "rate_limiter": null, "cache_type": null}]})");
  ASSERT_TRUE(c) << c.error().message();
  VmResources r = c->resources();
  auto config = r.vm_config();
  ASSERT_TRUE(config) << config.error().message();
  ASSERT_EQ(config->devices.size(), 2u);
  const auto& root = std::get<DiskSpec>(config->devices[0]);
  EXPECT_EQ(root.vhost_user_socket, "/tmp/vu.sock");
  EXPECT_EQ(root.queues, 2);
  EXPECT_EQ(std::get<DiskSpec>(config->devices[1]).path, "/proc/self/exe");
  EXPECT_NE(config->cmdline.find("root=/dev/vda rw"), std::string::npos) << config->cmdline;
  auto drives = r.vm_config_json()["drives"];
  ASSERT_EQ(drives.size(), 2u);
  EXPECT_EQ(drives[1], (nlohmann::json{{"drive_id", "rootfs"}, {"is_root_device", true},
                                       {"socket", "/tmp/vu.sock"}, {"queues", 2}}));
  EXPECT_EQ(drives[0]["path_on_host"], "/proc/self/exe");
}

// An NVMe drive as the root device: an NvmeSpec, root=/dev/nvme0n1; the drives keep their
// order across interfaces; GET /vm/config gives "interface" back only for the NVMe drive.
TEST(ConfigFile, NvmeDrive) {
  auto c = parse_config_file(R"({"boot-source": {"kernel_image_path": "/proc/self/exe"},
      "machine-config": {"vcpu_count": 2, "mem_size_mib": 128},
      "drives": [
        {"drive_id": "scratch", "is_root_device": false, "path_on_host": "/proc/self/exe"},
        {"drive_id": "rootfs", "is_root_device": true, "path_on_host": "/proc/self/exe",
         "interface": "nvme", "is_read_only": true},
        {"drive_id": "data", "is_root_device": false, "path_on_host": "/proc/self/exe",
         "interface": "nvme"}]})");
  ASSERT_TRUE(c) << c.error().message();
  VmResources r = c->resources();
  auto config = r.vm_config();
  ASSERT_TRUE(config) << config.error().message();
  ASSERT_EQ(config->devices.size(), 3u);
  ASSERT_TRUE(std::holds_alternative<NvmeSpec>(config->devices[0]));
  EXPECT_TRUE(std::get<NvmeSpec>(config->devices[0]).disk.read_only);
  EXPECT_TRUE(std::holds_alternative<DiskSpec>(config->devices[1]));
  EXPECT_TRUE(std::holds_alternative<NvmeSpec>(config->devices[2]));
  EXPECT_NE(config->cmdline.find("root=/dev/nvme0n1 ro"), std::string::npos) << config->cmdline;
  auto drives = r.vm_config_json()["drives"];
  ASSERT_EQ(drives.size(), 3u);
  EXPECT_FALSE(drives[0].contains("interface")) << drives.dump();
  EXPECT_EQ(drives[1]["interface"], "nvme") << drives.dump();
  EXPECT_EQ(drives[2]["interface"], "nvme") << drives.dump();

  auto bad = parse_config_file(R"({"boot-source": {"kernel_image_path": "/proc/self/exe"},
      "drives": [{"drive_id": "a", "is_root_device": true, "path_on_host": "/proc/self/exe",
                  "interface": "nvme", "queues": 2}]})");
  ASSERT_FALSE(bad);
  EXPECT_TRUE(bad.error().message().starts_with("drives[0].queues: not with interface \"nvme\""))
      << bad.error().message();
}

// tern's "locking" extension in a config file: "off" or false reaches the disk spec (both kinds)
// and comes back in GET /vm/config as false; a bad value names the drive's field.
TEST(ConfigFile, DriveLocking) {
  auto c = parse_config_file(R"({"boot-source": {"kernel_image_path": "/proc/self/exe"},
      "machine-config": {"vcpu_count": 1, "mem_size_mib": 128},
      "drives": [
        {"drive_id": "rootfs", "is_root_device": true, "path_on_host": "/proc/self/exe",
         "locking": "off"},
        {"drive_id": "data", "is_root_device": false, "path_on_host": "/proc/self/exe",
         "interface": "nvme", "locking": false},
        {"drive_id": "locked", "is_root_device": false, "path_on_host": "/proc/self/exe"}]})");
  ASSERT_TRUE(c) << c.error().message();
  VmResources r = c->resources();
  auto config = r.vm_config();
  ASSERT_TRUE(config) << config.error().message();
  ASSERT_EQ(config->devices.size(), 3u);
  EXPECT_FALSE(std::get<DiskSpec>(config->devices[0]).locking);
  EXPECT_FALSE(std::get<NvmeSpec>(config->devices[1]).disk.locking);
  EXPECT_TRUE(std::get<DiskSpec>(config->devices[2]).locking);
  auto drives = r.vm_config_json()["drives"];
  EXPECT_EQ(drives[0]["locking"], false) << drives.dump();
  EXPECT_EQ(drives[1]["locking"], false) << drives.dump();
  EXPECT_FALSE(drives[2].contains("locking")) << drives.dump();

  auto bad = parse_config_file(R"({"boot-source": {"kernel_image_path": "/proc/self/exe"},
      "drives": [{"drive_id": "a", "is_root_device": true, "path_on_host": "/proc/self/exe",
                  "locking": "maybe"}]})");
  ASSERT_FALSE(bad);
  EXPECT_TRUE(bad.error().message().starts_with("drives[0].locking: expected true, false"))
      << bad.error().message();
}

TEST(ConfigFile, VhostUserDriveErrorsNameTheField) {
  auto bad = [](const std::string& drive) {
    auto c = parse_config_file(R"({"boot-source": {"kernel_image_path": "/proc/self/exe"},
        "drives": [)" + drive + "]}");
    EXPECT_FALSE(c) << drive;
    return c ? std::string() : c.error().message();
  };
  EXPECT_TRUE(bad(R"({"drive_id": "a", "is_root_device": true, "socket": "/s",
                      "path_on_host": "/proc/self/exe"})")
                  .starts_with("drives[0].path_on_host: not with socket"));
  EXPECT_TRUE(bad(R"({"drive_id": "a", "is_root_device": true, "socket": "/s",
                      "is_read_only": true})")
                  .starts_with("drives[0].is_read_only: true: not with socket"));
  EXPECT_TRUE(bad(R"({"drive_id": "a", "is_root_device": true, "socket": "/s",
                      "io_engine": "Async"})")
                  .starts_with("drives[0].io_engine: not with socket"));
  EXPECT_EQ(bad(R"({"drive_id": "a", "is_root_device": true, "socket": ""})"),
            "drives[0].socket: empty path");
}

// Two elements on one tap: refused when the VM config is built, naming the second's field.
TEST(ConfigFile, NetworkInterfacesOnOneTapAreRefused) {
  auto c = parse_config_file(R"({"boot-source": {"kernel_image_path": "/proc/self/exe"},
      "network-interfaces": [
        {"iface_id": "eth0", "host_dev_name": "tap0"},
        {"iface_id": "eth1", "host_dev_name": "tap0"}]})");
  ASSERT_TRUE(c) << c.error().message();
  auto config = c->resources().vm_config();
  ASSERT_FALSE(config);
  EXPECT_EQ(config.error().message(), "network-interfaces[1].host_dev_name: eth1: tap \"tap0\" "
                                      "is already used by interface \"eth0\"");
}

TEST(ConfigFile, EntropySection) {
  auto c = parse_config_file(R"({"boot-source": {"kernel_image_path": "/proc/self/exe"},
                                 "entropy": {"rate_limiter": {"ops": {"size": 5, "refill_time": 10}}}})");
  ASSERT_TRUE(c) << c.error().message();
  ASSERT_TRUE(c->device<RngSpec>());
  EXPECT_EQ(c->device<RngSpec>()->rate_limiter.ops, (TokenBucketConfig{5, 0, 10}));
  EXPECT_EQ(c->resources().device<RngSpec>(), c->device<RngSpec>());
  auto none = parse_config_file(kFirecrackerShape);
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->device<RngSpec>());
  auto bad = parse_config_file(R"({"boot-source": {"kernel_image_path": "/proc/self/exe"},
                                   "entropy": {"rate_limiter": {"ops": {"size": 5}}}})");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message(), "entropy.rate_limiter.ops.refill_time: missing required field");
}

TEST(ConfigFile, ErrorsNameTheField) {
  auto bad = [](const std::string& text) {
    auto c = parse_config_file(text);
    EXPECT_FALSE(c);
    return c ? std::string() : c.error().message();
  };
  EXPECT_EQ(bad(R"({"machine-config": {"vcpu_count": 1, "mem_size_mib": 128}})"),
            "boot-source: missing required section");
  EXPECT_EQ(bad(R"({"boot-source": {"kernel_image_path": "/proc/self/exe"},
                    "machine-config": {"vcpu_count": 1.5, "mem_size_mib": 128}})"),
            "machine-config.vcpu_count: expected an integer, got number");
  EXPECT_EQ(bad(R"({"boot-source": {"kernel_image_path": "/proc/self/exe", "kernel": 1}})"),
            "boot-source.kernel: unknown field");
  EXPECT_EQ(bad(R"({"boot-source": {"kernel_image_path": "/proc/self/exe"},
                    "network-interfaces": [{"iface_id": "eth0"}]})"),
            "network-interfaces[0].host_dev_name: missing required field");
  EXPECT_EQ(bad(R"({"boot-source": {"kernel_image_path": "/proc/self/exe"},
                    "network-interfaces": {"iface_id": "eth0"}})"),
            "network-interfaces: expected an array, got object");
  EXPECT_EQ(bad(R"({"boot-source": {"kernel_image_path": "/proc/self/exe"},
                    "network-interfaces": [{"iface_id": "eth0", "host_dev_name": "tap0"},
                                           {"iface_id": "eth1", "host_dev_name": "tap1", "guest_mac": "0:1:2:3:4:5"}]})"),
            "network-interfaces[1].guest_mac: \"0:1:2:3:4:5\" is not a MAC address (aa:bb:cc:dd:ee:ff)");
  EXPECT_EQ(bad(R"({"boot-source": {"kernel_image_path": "/proc/self/exe"},
                    "network-interfaces": [{"iface_id": "eth0", "host_dev_name": "tap0", "rx_rate_limiter": {}}]})"),
            "network-interfaces[0].rx_rate_limiter: not supported by tern");
  EXPECT_EQ(bad(R"({"boot-source": {"kernel_image_path": "/proc/self/exe"},
                    "network-interfaces": [{"iface_id": "eth0", "host_dev_name": "tap0"},
                                           {"iface_id": "eth0", "host_dev_name": "tap1"}]})"),
            "network-interfaces[1].iface_id: \"eth0\" is used twice");
  EXPECT_EQ(bad(R"({"boot-source": {"kernel_image_path": "/proc/self/exe"},
                    "drives": [{"drive_id": "a", "is_root_device": true, "path_on_host": "/proc/self/exe"},
                               {"drive_id": "a", "is_root_device": false, "path_on_host": "/proc/self/exe"}]})"),
            "drives[1].drive_id: \"a\" is used twice");
  EXPECT_EQ(bad(R"({"boot-source": {"kernel_image_path": "/proc/self/exe"}, "extra": 1})"),
            "extra: unknown field");
}

// tern's "kernel-exits" section, as PUT /tern/kernel-exits: into VmResources, VmConfig and
// GET /vm/config; absent or null: off; bad fields named.
TEST(ConfigFile, KernelExitsSection) {
  auto on = parse_config_file(R"({"boot-source": {"kernel_image_path": "/proc/self/exe"},
      "kernel-exits": {"enabled": true}})");
  ASSERT_TRUE(on) << on.error().message();
  EXPECT_TRUE(on->kernel_exits);
  VmResources r = on->resources();
  EXPECT_TRUE(r.kernel_exits);
  EXPECT_EQ(r.vm_config_json()["kernel-exits"], nlohmann::json({{"enabled", true}}));
  auto config = r.vm_config();
  ASSERT_TRUE(config) << config.error().message();
  EXPECT_TRUE(config->kernel_exits);
  for (const char* text : {R"({"boot-source": {"kernel_image_path": "/proc/self/exe"}})",
                           R"({"boot-source": {"kernel_image_path": "/proc/self/exe"},
                               "kernel-exits": null})"}) {
    auto off = parse_config_file(text);
    ASSERT_TRUE(off) << off.error().message();
    EXPECT_FALSE(off->kernel_exits);
    EXPECT_FALSE(off->resources().vm_config()->kernel_exits);
  }
  auto bad = parse_config_file(R"({"boot-source": {"kernel_image_path": "/proc/self/exe"},
      "kernel-exits": {"enabled": true, "maps": 1}})");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message(), "kernel-exits.maps: unknown field");
  auto missing = parse_config_file(R"({"boot-source": {"kernel_image_path": "/proc/self/exe"},
      "kernel-exits": {}})");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().message(),
            "kernel-exits.enabled: missing required field (true or false)");
}

}  // namespace
}  // namespace tern
