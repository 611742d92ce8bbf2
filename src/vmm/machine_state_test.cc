// Unit tests: the machine section round-trips (version 3: devices keyed by kind), still reads
// version 1 (disks only; version 2 in vmm/devices/disk_kind_test.cc), and refuses out-of-range
// values naming them.
#include "vmm/machine_state.h"

#include <gtest/gtest.h>

#include "snapshot/sections.h"

namespace tern::snap {
namespace {

DiskSpec sample_disk() {
  DiskSpec d;
  d.path = "/var/lib/tern/disk.img";
  d.cache = CacheMode::kNone;
  d.read_only = true;
  d.serial = "disk0";
  d.queues = 2;
  d.engine = IoEngineKind::kThreads;
  return d;
}

std::vector<uint8_t> size_facts(uint64_t size) {
  ByteWriter w;
  w.u64(size);
  return w.take();
}

MachineState sample() {
  MachineState m;
  m.memory_bytes = 512ull << 20;
  m.vcpus = 2;
  m.cmdline = "console=ttyS0 quiet";
  m.kernel_path = "/boot/vmlinuz";
  m.initrd_path = "/boot/initrd";
  m.devices.push_back(
      {DeviceSpec(std::in_place_type<DiskSpec>, sample_disk()), size_facts(1ull << 30)});
  RngSpec rng;
  rng.rate_limiter.bandwidth = TokenBucketConfig{1 << 20, 4096, 1000};
  m.devices.push_back({DeviceSpec(std::in_place_type<RngSpec>, rng), {}});
  NetSpec net;
  net.iface_id = "eth0";
  net.host_dev_name = "tap0";
  net.guest_mac = MacAddress{0x02, 0xfc, 0, 0, 0, 1};
  net.queue_pairs = 2;
  net.vhost = true;
  net.mtu = 9000;
  m.devices.push_back({DeviceSpec(std::in_place_type<NetSpec>, net), {}});
  NetSpec plain;
  plain.iface_id = "eth1";
  plain.host_dev_name = "tap1";
  m.devices.push_back({DeviceSpec(std::in_place_type<NetSpec>, plain), {}});
  return m;
}

std::vector<uint8_t> encoded(const MachineState& m) {
  ByteWriter w;
  encode_machine_state(w, m);
  return w.take();
}

TEST(MachineState, RoundTrip) {
  auto bytes = encoded(sample());
  ByteReader r(bytes, "machine");
  auto m = decode_machine_state(r);
  ASSERT_TRUE(m) << m.error().message();
  EXPECT_EQ(m->memory_bytes, 512ull << 20);
  EXPECT_EQ(m->vcpus, 2u);
  EXPECT_EQ(m->cmdline, "console=ttyS0 quiet");
  EXPECT_EQ(m->kernel_path, "/boot/vmlinuz");
  EXPECT_EQ(m->initrd_path, "/boot/initrd");
  ASSERT_EQ(m->devices.size(), 4u);
  const auto& disk = std::get<DiskSpec>(m->devices[0].spec);
  EXPECT_EQ(disk.path, "/var/lib/tern/disk.img");
  EXPECT_EQ(disk.cache, CacheMode::kNone);
  EXPECT_TRUE(disk.read_only);
  EXPECT_EQ(disk.serial, "disk0");
  EXPECT_EQ(disk.queues, 2);
  EXPECT_EQ(disk.engine, IoEngineKind::kThreads);
  EXPECT_EQ(m->devices[0].facts, size_facts(1ull << 30));
  EXPECT_EQ(device_kind(m->devices[1].spec), "virtio-rng");
  EXPECT_EQ(std::get<RngSpec>(m->devices[1].spec), std::get<RngSpec>(sample().devices[1].spec));
  EXPECT_EQ(device_kind(m->devices[2].spec), "virtio-net");
  EXPECT_EQ(device_name(m->devices[3].spec, 1), "virtio-net1");
  EXPECT_EQ(std::get<NetSpec>(m->devices[2].spec), std::get<NetSpec>(sample().devices[2].spec));
  EXPECT_EQ(std::get<NetSpec>(m->devices[3].spec), std::get<NetSpec>(sample().devices[3].spec));
  EXPECT_EQ(encoded(*m), bytes);
}

// A state file written before the device registry (machine section version 1) still restores.
TEST(MachineState, ReadsVersion1) {
  ByteWriter w;
  w.u64(256ull << 20);
  w.u32(1);
  w.string("console=ttyS0");
  w.u32(1);  // one disk, v1 layout
  w.string("/img/root.ext4");
  w.u8(static_cast<uint8_t>(CacheMode::kUnsafe));
  w.boolean(false);
  w.string("");
  w.u16(1);
  w.u16(256);
  w.u8(static_cast<uint8_t>(IoEngineKind::kIoUring));
  w.u64(8ull << 20);
  auto bytes = w.take();
  ByteReader r(bytes, "machine");
  auto m = decode_machine_state_version(r, 1);
  ASSERT_TRUE(m) << m.error().message();
  EXPECT_EQ(m->memory_bytes, 256ull << 20);
  EXPECT_TRUE(m->kernel_path.empty());
  ASSERT_EQ(m->devices.size(), 1u);
  EXPECT_EQ(std::get<DiskSpec>(m->devices[0].spec).path, "/img/root.ext4");
  EXPECT_EQ(m->devices[0].facts, size_facts(8ull << 20));
  ByteReader next(bytes, "machine");
  EXPECT_FALSE(decode_machine_state_version(next, kMachineSectionVersion + 1));
}

TEST(MachineState, EveryTruncationFails) {
  auto bytes = encoded(sample());
  for (size_t n = 0; n < bytes.size(); ++n) {
    ByteReader r(std::span<const uint8_t>(bytes).first(n), "machine");
    EXPECT_FALSE(decode_machine_state(r)) << n;
  }
}

TEST(MachineState, RefusesBadValues) {
  auto check = [](MachineState m, const std::string& want) {
    auto bytes = encoded(m);
    ByteReader r(bytes, "machine");
    auto d = decode_machine_state(r);
    ASSERT_FALSE(d);
    EXPECT_NE(d.error().message().find(want), std::string::npos) << d.error().message();
  };
  MachineState m = sample();
  m.memory_bytes = 12345;
  check(m, "memory size 12345 is invalid");
  m = sample();
  m.vcpus = 0;
  check(m, "vCPU count 0 is invalid");
  m = sample();
  std::get<DiskSpec>(m.devices[0].spec).queues = 0;
  check(m, "device 0");
  m = sample();
  std::get<RngSpec>(m.devices[1].spec).rate_limiter.bandwidth->refill_time_ms = 0;
  check(m, "entropy.rate_limiter.bandwidth.refill_time");
  m = sample();
  std::get<NetSpec>(m.devices[2].spec).queue_pairs = 0;
  check(m, "network-interfaces.queues");
  m = sample();
  std::get<NetSpec>(m.devices[2].spec).guest_mac = MacAddress{0xff, 0, 0, 0, 0, 1};
  check(m, "network-interfaces.guest_mac");
  m = sample();
  std::get<NetSpec>(m.devices[3].spec).host_dev_name = "a/b";
  check(m, "network-interfaces.host_dev_name");
  m = sample();
  std::get<NetSpec>(m.devices[3].spec).host_dev_name = "tap0";
  check(m, "network-interfaces[1].host_dev_name");
  m = sample();
  m.vcpus = 1;
  check(m, "network-interfaces[0].queues");
  auto bytes = encoded(sample());
  bytes.push_back(0);
  ByteReader r(bytes, "machine");
  auto d = decode_machine_state(r);
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message().find("trailing"), std::string::npos);
}

TEST(MachineState, UnknownDeviceKindIsNamed) {
  ByteWriter w;
  w.u64(256ull << 20);
  w.u32(1);
  w.string("");
  w.string("");
  w.string("");
  w.u32(1);
  w.string("virtio-gpu");
  w.blob({});
  w.blob({});
  auto bytes = w.take();
  ByteReader r(bytes, "machine");
  auto d = decode_machine_state(r);
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message().find("device kind \"virtio-gpu\" is unknown"), std::string::npos)
      << d.error().message();
}

// A device record's facts are read to their end: bytes its kind does not read (an rng has no
// facts) are refused, naming the device, not ignored.
TEST(MachineState, TrailingDeviceFactsAreRefused) {
  RngSpec rng;
  std::vector<SavedDevice> saved{{DeviceSpec(std::in_place_type<RngSpec>, rng), {1, 2, 3}}};
  auto d = make_restored_devices(saved);
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message().find("snapshot rng 0"), std::string::npos) << d.error().message();
  EXPECT_NE(d.error().message().find("trailing"), std::string::npos) << d.error().message();
  saved[0].facts.clear();
  auto ok = make_restored_devices(saved);
  EXPECT_TRUE(ok) << ok.error().message();
}

// An untrusted kind string is named with its control bytes escaped (no terminal escapes or
// line breaks from a snapshot file reach the error message).
TEST(MachineState, UnknownKindWithControlBytesIsEscaped) {
  ByteWriter w;
  w.u64(256ull << 20);
  w.u32(1);
  w.string("");
  w.string("");
  w.string("");
  w.u32(1);
  w.string(std::string("a\x1b[2J\nb\\", 8));
  w.blob({});
  w.blob({});
  auto bytes = w.take();
  ByteReader r(bytes, "machine");
  auto d = decode_machine_state(r);
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message().find("device kind \"a\\x1b[2J\\x0ab\\x5c\" is unknown"),
            std::string::npos)
      << d.error().message();
}

MachineState firmware_sample() {
  MachineState m;
  m.memory_bytes = 1ull << 30;
  m.vcpus = 2;
  m.on_reboot = OnReboot::kRestart;
  m.firmware = SavedFirmware{"/usr/share/OVMF/OVMF_CODE_4M.fd", 3653632, 0xdeadbeef,
                             "/var/lib/tern/vars.fd"};
  return m;
}

// Version 7: the VM's on_reboot and its firmware round-trip; a direct boot's has none.
TEST(MachineState, FirmwareAndOnRebootRoundTrip) {
  const auto bytes = encoded(firmware_sample());
  ByteReader r(bytes, "machine");
  auto m = decode_machine_state(r);
  ASSERT_TRUE(m) << m.error().message();
  EXPECT_EQ(m->on_reboot, OnReboot::kRestart);
  ASSERT_TRUE(m->firmware);
  EXPECT_EQ(*m->firmware, *firmware_sample().firmware);
  EXPECT_EQ(encoded(*m), bytes);
  MachineState direct = firmware_sample();
  direct.firmware.reset();
  direct.on_reboot = OnReboot::kExit;
  const auto dbytes = encoded(direct);
  ByteReader dr(dbytes, "machine");
  auto d = decode_machine_state(dr);
  ASSERT_TRUE(d) << d.error().message();
  EXPECT_FALSE(d->firmware);
  EXPECT_EQ(d->on_reboot, OnReboot::kExit);
}

// Version 6 (before on_reboot and firmware) reads as a direct boot that exits on reboot.
TEST(MachineState, Version6HasNoFirmwareAndExitsOnReboot) {
  MachineState direct = firmware_sample();
  direct.firmware.reset();
  auto bytes = encoded(direct);
  bytes.resize(bytes.size() - 2);  // version 7's on_reboot byte and firmware flag
  ByteReader r(bytes, "machine");
  auto m = decode_machine_state_version(r, 6);
  ASSERT_TRUE(m) << m.error().message();
  EXPECT_EQ(m->on_reboot, OnReboot::kExit);
  EXPECT_FALSE(m->firmware);
}

TEST(MachineState, RefusesBadFirmwareFields) {
  auto refused = [](const std::vector<uint8_t>& bytes, const std::string& want) {
    ByteReader r(bytes, "machine");
    auto d = decode_machine_state(r);
    ASSERT_FALSE(d);
    EXPECT_NE(d.error().message().find(want), std::string::npos) << d.error().message();
  };
  MachineState m = firmware_sample();
  m.firmware->size = 0;
  refused(encoded(m), "firmware: size 0 is invalid");
  m = firmware_sample();
  m.firmware->size = (16ull << 20) + 1;
  refused(encoded(m), "is invalid (1..16 MiB)");
  m = firmware_sample();
  m.firmware->path.clear();
  refused(encoded(m), "firmware: empty path");
  m = firmware_sample();
  m.kernel_path = "/boot/vmlinuz";
  refused(encoded(m), "a firmware boot with a kernel");
  // on_reboot is the byte after the (empty) device list: 8 + 4 + 3 strings + 4.
  auto bytes = encoded(firmware_sample());
  const size_t at = 8 + 4 + 3 * 4 + 4;
  ASSERT_EQ(bytes[at], 1);
  bytes[at] = 2;
  refused(bytes, "on_reboot 2 is invalid");
  bytes = encoded(firmware_sample());
  bytes[at + 1] = 7;  // the firmware flag is a boolean
  refused(bytes, "bad boolean value 7");
  bytes = encoded(firmware_sample());
  for (size_t n = at; n < bytes.size(); ++n) {
    ByteReader r(std::span<const uint8_t>(bytes).first(n), "machine");
    EXPECT_FALSE(decode_machine_state(r)) << n;
  }
}

}  // namespace
}  // namespace tern::snap
