// Unit tests: NvmeKind in the device registry — the machine section round trip (validated on
// decode), drives with interface nvme become NvmeSpecs named nvme0, nvme1 (indexed apart from
// the virtio disks, in drive order), the image's facts / protected file / flush, and restore
// errors naming "snapshot nvme disk <i>".
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "base/fd.h"
#include "base/testing/temp_dir.h"
#include "nvme/nvme_controller.h"
#include "snapshot/sections.h"
#include "vmm/devices/device_kinds.h"
#include "vmm/devices/device_registry.h"
#include "vmm/machine_state.h"

namespace tern {
namespace {

NvmeSpec nvme_test_spec(std::string path = "/var/lib/tern/nvme.img") {
  NvmeSpec s;
  s.disk.interface = DiskInterface::kNvme;
  s.disk.path = std::move(path);
  s.disk.cache = CacheMode::kDirectSync;
  s.disk.read_only = true;
  s.disk.serial = "NVME-SERIAL-1";
  s.disk.engine = IoEngineKind::kThreads;
  return s;
}

std::string nvme_test_image(const tern::testing::TempDir& dir, const std::string& name,
                            off_t size) {
  std::string path = dir.path() + "/" + name;
  UniqueFd fd(::open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
  EXPECT_TRUE(fd.valid());
  EXPECT_EQ(::ftruncate(fd.get(), size), 0);
  return path;
}

TEST(NvmeKind, SpecRoundTrips) {
  const NvmeSpec s = nvme_test_spec();
  snap::ByteWriter w;
  NvmeKind::encode(w, s);
  auto bytes = w.take();
  snap::ByteReader r(bytes, "nvme");
  auto back = NvmeKind::decode(r, snap::kMachineSectionVersion);
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_TRUE(r.expect_end());
  EXPECT_EQ(back->disk.interface, DiskInterface::kNvme);
  EXPECT_EQ(back->disk.path, s.disk.path);
  EXPECT_EQ(back->disk.cache, CacheMode::kDirectSync);
  EXPECT_TRUE(back->disk.read_only);
  EXPECT_EQ(back->disk.serial, "NVME-SERIAL-1");
  EXPECT_EQ(back->disk.engine, IoEngineKind::kThreads);
}

// Machine section v4 carries the locking flag; a v3 record (no flag) restores with locking on.
TEST(NvmeKind, LockingFlagAndVersion3) {
  NvmeSpec s = nvme_test_spec();
  s.disk.locking = false;
  s.disk.format = DiskFormat::kRaw;
  snap::ByteWriter w;
  NvmeKind::encode(w, s);
  auto bytes = w.take();
  snap::ByteReader r6(bytes, "nvme");
  auto v6 = NvmeKind::decode(r6, 6);  // machine section v6: the format and backing_files
  ASSERT_TRUE(v6) << v6.error().message();
  EXPECT_TRUE(r6.expect_end());
  EXPECT_EQ(v6->disk.format, DiskFormat::kRaw);
  EXPECT_FALSE(v6->disk.backing_files);
  bytes.resize(bytes.size() - 2);  // the v4/v5 layout
  snap::ByteReader r(bytes, "nvme");
  auto back = NvmeKind::decode(r, 4);
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_TRUE(r.expect_end());
  EXPECT_FALSE(back->disk.locking);
  EXPECT_EQ(back->disk.format, DiskFormat::kAuto);  // before v6: probed
  bytes.pop_back();  // the v3 layout: no flag
  snap::ByteReader r3(bytes, "nvme");
  auto v3 = NvmeKind::decode(r3, 3);
  ASSERT_TRUE(v3) << v3.error().message();
  EXPECT_TRUE(r3.expect_end());
  EXPECT_TRUE(v3->disk.locking);
}

TEST(NvmeKind, DecodeValidates) {
  auto decode = [](const NvmeSpec& s, int corrupt_at = -1, uint8_t value = 0) {
    snap::ByteWriter w;
    NvmeKind::encode(w, s);
    auto bytes = w.take();
    if (corrupt_at >= 0) bytes[static_cast<size_t>(corrupt_at)] = value;
    snap::ByteReader r(bytes, "nvme");
    return NvmeKind::decode(r, snap::kMachineSectionVersion);
  };
  NvmeSpec no_path = nvme_test_spec("");
  auto e = decode(no_path);
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().message().find("--disk path"), std::string::npos) << e.error().message();
  NvmeSpec long_serial = nvme_test_spec();
  long_serial.disk.serial = std::string(21, 'x');
  EXPECT_FALSE(decode(long_serial));
  // The cache byte follows the path (u32 length + bytes).
  NvmeSpec s = nvme_test_spec("p");
  e = decode(s, 5, 9);
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().message().find("bad cache mode"), std::string::npos) << e.error().message();
}

TEST(NvmeKind, SavedDeviceRoundTripsThroughTheMachineSection) {
  SavedDevice d{DeviceSpec(std::in_place_type<NvmeSpec>, nvme_test_spec()), {1, 2, 3, 4, 5, 6, 7, 8}};
  EXPECT_EQ(device_kind(d.spec), "nvme");
  EXPECT_EQ(device_name(d.spec, 1), "nvme1");
  snap::ByteWriter w;
  encode_saved_device(w, d);
  auto bytes = w.take();
  snap::ByteReader r(bytes, "machine");
  auto back = decode_saved_device(r, snap::kMachineSectionVersion);
  ASSERT_TRUE(back) << back.error().message();
  ASSERT_TRUE(std::holds_alternative<NvmeSpec>(back->spec));
  EXPECT_EQ(std::get<NvmeSpec>(back->spec).disk.serial, "NVME-SERIAL-1");
  EXPECT_EQ(back->facts, d.facts);
}

TEST(NvmeKind, DiskDeviceSpecPicksTheKind) {
  DiskConfig c;
  c.path = "/img";
  EXPECT_TRUE(std::holds_alternative<DiskSpec>(disk_device_spec(c)));
  c.interface = DiskInterface::kNvme;
  DeviceSpec n = disk_device_spec(c);
  ASSERT_TRUE(std::holds_alternative<NvmeSpec>(n));
  ASSERT_NE(disk_config_of(n), nullptr);
  EXPECT_EQ(disk_config_of(n)->path, "/img");
  EXPECT_EQ(disk_config_of(DeviceSpec(std::in_place_type<RngSpec>)), nullptr);
}

// A virtio-blk disk is never made from an NVMe configuration (its machine record has no interface).
TEST(NvmeKind, VirtioKindRefusesAnNvmeConfig) {
  DiskSpec c;
  c.path = "/img";
  c.interface = DiskInterface::kNvme;
  auto dev = DiskKind::make(c, "virtio-blk0");
  ASSERT_FALSE(dev);
  EXPECT_NE(dev.error().message().find("--disk interface=nvme"), std::string::npos);
}

TEST(NvmeKind, ImageFactsProtectedFileAndFlush) {
  tern::testing::TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  NvmeSpec s = nvme_test_spec(nvme_test_image(dir, "nvme.img", 1 << 20));
  s.disk.read_only = false;
  s.disk.cache = CacheMode::kWriteback;
  auto dev = NvmeKind::make(s, "nvme0");
  ASSERT_TRUE(dev) << dev.error().message();
  EXPECT_EQ((*dev)->name(), "nvme0");
  snap::ByteWriter w;
  NvmeKind::save_facts(w, s, **dev);
  snap::ByteReader r(w.data(), "facts");
  auto size = r.u64();
  ASSERT_TRUE(size);
  EXPECT_EQ(*size, 1u << 20);
  snap::ByteReader again(w.data(), "facts");
  EXPECT_TRUE(NvmeKind::check_facts(again, s, **dev));
  auto files = NvmeKind::protected_files(**dev, 0);
  ASSERT_TRUE(files) << files.error().message();
  EXPECT_EQ(files->size(), 1u);
  EXPECT_TRUE(NvmeKind::flush(**dev));

  // The image grew: the restore is refused, naming the disk. (The saving VM is gone first: while
  // it runs, its image lock refuses the restore.)
  dev->reset();
  ASSERT_EQ(::truncate(s.disk.path.c_str(), 2 << 20), 0);
  std::vector<SavedDevice> saved{{DeviceSpec(std::in_place_type<NvmeSpec>, s), w.data()}};
  auto restored = make_restored_devices(saved);
  ASSERT_FALSE(restored);
  EXPECT_NE(restored.error().message().find("snapshot nvme disk 0: "), std::string::npos)
      << restored.error().message();
  EXPECT_NE(restored.error().message().find("changed size"), std::string::npos);
}

TEST(NvmeKind, DevicesKeepDriveOrderAndIndexPerKind) {
  tern::testing::TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  DiskConfig virtio;
  virtio.path = nvme_test_image(dir, "a.img", 1 << 20);
  DiskConfig nvme = virtio;
  nvme.interface = DiskInterface::kNvme;
  nvme.path = nvme_test_image(dir, "b.img", 1 << 20);
  DiskConfig nvme2 = nvme;  // an image of its own: two disks on one image refuse each other
  nvme2.path = nvme_test_image(dir, "c.img", 1 << 20);
  std::vector<DeviceSpec> specs{disk_device_spec(nvme), disk_device_spec(virtio),
                                disk_device_spec(nvme2)};
  auto made = make_devices(specs);
  ASSERT_TRUE(made) << made.error().message();
  ASSERT_EQ(made->size(), 3u);
  EXPECT_EQ(made_device_name((*made)[0]), "nvme0");
  EXPECT_EQ(made_device_name((*made)[1]), "virtio-blk0");
  EXPECT_EQ(made_device_name((*made)[2]), "nvme1");
  EXPECT_TRUE(std::holds_alternative<std::shared_ptr<PciFunctionModel>>((*made)[0]));
  EXPECT_TRUE(std::holds_alternative<std::shared_ptr<VirtioDevice>>((*made)[1]));
  // Every hook reaches the image of each kind.
  std::vector<SavedDevice> saved;
  for (size_t i = 0; i < specs.size(); ++i) saved.push_back(save_device(specs[i], (*made)[i]));
  auto files = device_protected_files(saved, *made);
  ASSERT_TRUE(files) << files.error().message();
  EXPECT_EQ(files->size(), 3u);
  EXPECT_TRUE(flush_devices(saved, *made));
  made->clear();  // the saving VM goes away (its image locks with it) before the restore
  auto restored = make_restored_devices(saved);
  ASSERT_TRUE(restored) << restored.error().message();
  EXPECT_EQ(made_device_name((*restored)[2]), "nvme1");
}

// A missing image fails at make, naming the --disk field (before anything runs).
TEST(NvmeKind, MissingImageNamesTheField) {
  tern::testing::TempDir dir;
  NvmeSpec s = nvme_test_spec(dir.path() + "/absent.img");
  auto dev = NvmeKind::make(s, "nvme0");
  ASSERT_FALSE(dev);
  EXPECT_NE(dev.error().message().find("--disk"), std::string::npos) << dev.error().message();
}

}  // namespace
}  // namespace tern

#include "vmm/devices/device_surfaces.h"

namespace tern {
namespace {

// Linux refuses a second NVMe controller with the first's subsystem NQN (made of the serial):
// two NVMe disks with one serial, explicit or the "tern-nvme<i>" default, are refused up front.
TEST(NvmeKindSerials, DuplicateSerialsAreRefused) {
  auto with_serial = [](std::string path, std::string serial) {
    NvmeSpec s = nvme_test_spec(std::move(path));
    s.disk.serial = std::move(serial);
    return DeviceSpec(std::in_place_type<NvmeSpec>, s);
  };
  std::vector<DeviceSpec> devices{with_serial("/a.img", ""), with_serial("/b.img", "")};
  EXPECT_TRUE(check_devices_for_vm(devices, 1, true));
  devices.push_back(with_serial("/c.img", "SN1"));
  EXPECT_TRUE(check_devices_for_vm(devices, 1, true));
  devices.push_back(with_serial("/d.img", "SN1 "));  // SN is space padded: the same serial
  auto r = check_devices_for_vm(devices, 1, true);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().op, "--disk serial");
  EXPECT_NE(r.error().message().find("/c.img"), std::string::npos) << r.error().message();
  devices.back() = with_serial("/d.img", "tern-nvme1");  // the second disk's default
  r = check_devices_for_vm(devices, 1, false);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().op, "drives.serial");
  devices.back() = with_serial("/d.img", "SN2");
  EXPECT_TRUE(check_devices_for_vm(devices, 1, false));
}

}  // namespace
}  // namespace tern
