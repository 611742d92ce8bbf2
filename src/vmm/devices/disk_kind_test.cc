// Unit tests: DiskKind for both kinds of disk — a disk tern serves (an image) and a vhost-user
// disk (a back-end's socket): machine section round trips, specs written by a tern before
// vhost-user (machine section version 2) still decode, a vhost-user disk has no facts, protected
// files or flush, and its front-end's errors name --disk vhost-user=.
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "base/fd.h"
#include "base/testing/temp_dir.h"
#include "snapshot/sections.h"
#include "virtio/testing/fake_virtio_device.h"
#include "vmm/devices/device_kinds.h"
#include "vmm/devices/device_registry.h"
#include "vmm/machine_state.h"

namespace tern {
namespace {

DiskSpec image_disk() {
  DiskSpec d;
  d.path = "/var/lib/tern/disk.img";
  d.cache = CacheMode::kNone;
  d.read_only = true;
  d.serial = "disk0";
  d.queues = 2;
  d.queue_size = 128;
  d.engine = IoEngineKind::kThreads;
  d.format = DiskFormat::kQcow2;  // machine section v6
  d.backing_files = true;
  return d;
}

// image_disk() as a spec written before notification tuning (machine section version 5)
// decodes: every tuning off, whatever today's defaults are.
DiskSpec pre_v5_image_disk() {
  DiskSpec d = image_disk();
  d.format = DiskFormat::kAuto;  // before v6: probed, backing files off
  d.backing_files = false;
  d.kick_suppress = false;
  d.coalesce_us = 0;
  d.poll_us = 0;
  return d;
}

DiskSpec vhost_user_disk() {
  DiskSpec d;
  d.vhost_user_socket = "/run/tern/vu-blk0.sock";
  d.queues = 4;
  d.queue_size = 512;
  return d;
}

void expect_same(const DiskSpec& a, const DiskSpec& b) {
  EXPECT_EQ(a.path, b.path);
  EXPECT_EQ(a.cache, b.cache);
  EXPECT_EQ(a.read_only, b.read_only);
  EXPECT_EQ(a.serial, b.serial);
  EXPECT_EQ(a.queues, b.queues);
  EXPECT_EQ(a.queue_size, b.queue_size);
  EXPECT_EQ(a.engine, b.engine);
  EXPECT_EQ(a.vhost_user_socket, b.vhost_user_socket);
  EXPECT_EQ(a.locking, b.locking);
  EXPECT_EQ(a.format, b.format);
  EXPECT_EQ(a.backing_files, b.backing_files);
  EXPECT_EQ(a.kick_suppress, b.kick_suppress);
  EXPECT_EQ(a.coalesce_us, b.coalesce_us);
  EXPECT_EQ(a.poll_us, b.poll_us);
}

Result<DiskSpec> round_trip(const DiskSpec& d) {
  snap::ByteWriter w;
  DiskKind::encode(w, d);
  auto bytes = w.take();
  snap::ByteReader r(bytes, "disk");
  ASSIGN_OR_RETURN(DiskSpec back, DiskKind::decode(r, snap::kMachineSectionVersion));
  TRY(r.expect_end());
  return back;
}

TEST(DiskKind, RoundTripsBothKinds) {
  DiskSpec unlocked = image_disk();
  unlocked.locking = false;
  DiskSpec tuned = image_disk();
  tuned.kick_suppress = !tuned.kick_suppress;
  tuned.coalesce_us = 40;
  tuned.poll_us = 10000;
  for (const DiskSpec& d : {image_disk(), vhost_user_disk(), unlocked, tuned}) {
    auto back = round_trip(d);
    ASSERT_TRUE(back) << back.error().message();
    expect_same(*back, d);
  }
}

// DiskKind::encode as tern wrote it before vhost-user (machine section version 2).
std::vector<uint8_t> version2_spec(const DiskSpec& c) {
  snap::ByteWriter w;
  w.string(c.path);
  w.u8(static_cast<uint8_t>(c.cache));
  w.boolean(c.read_only);
  w.string(c.serial);
  w.u16(c.queues);
  w.u16(c.queue_size);
  w.u8(static_cast<uint8_t>(c.engine));
  return w.take();
}

TEST(DiskKind, DecodesVersion2Specs) {
  auto bytes = version2_spec(image_disk());
  snap::ByteReader r(bytes, "disk");
  auto d = DiskKind::decode(r, 2);
  ASSERT_TRUE(d) << d.error().message();
  EXPECT_TRUE(r.expect_end());
  expect_same(*d, pre_v5_image_disk());
  EXPECT_TRUE(d->locking);  // before version 4: locking on
  EXPECT_FALSE(d->kick_suppress);  // before version 5: no notification tuning
  EXPECT_EQ(d->coalesce_us, 0u);
  EXPECT_EQ(d->poll_us, 0u);
  // The same bytes are not a version 3 spec (the socket is missing).
  snap::ByteReader r3(bytes, "disk");
  EXPECT_FALSE(DiskKind::decode(r3, 3));
}

// A vhost-user disk saved before notification tuning (machine section versions 3 and 4) still
// restores: it keeps the default tuning (refused otherwise: the back-end's), not "all off".
TEST(DiskKind, DecodesPreVersion5VhostUserSpecs) {
  for (uint32_t version : {3u, 4u}) {
    snap::ByteWriter w;
    w.bytes(version2_spec(vhost_user_disk()));
    w.string(vhost_user_disk().vhost_user_socket);
    if (version >= 4) w.boolean(true);  // locking
    auto bytes = w.take();
    snap::ByteReader r(bytes, "disk");
    auto d = DiskKind::decode(r, version);
    ASSERT_TRUE(d) << "version " << version << ": " << d.error().message();
    EXPECT_TRUE(r.expect_end());
    expect_same(*d, vhost_user_disk());
  }
}

// A whole machine section of version 2 (a disk, an rng) as the tern before vhost-user wrote it.
TEST(DiskKind, Version2MachineSectionDecodes) {
  snap::ByteWriter w;
  w.u64(256ull << 20);
  w.u32(2);
  w.string("console=ttyS0");
  w.string("/boot/vmlinuz");
  w.string("");
  w.u32(2);
  w.string("virtio-blk");
  w.blob(version2_spec(image_disk()));
  snap::ByteWriter facts;
  facts.u64(1ull << 30);
  w.blob(facts.data());
  w.string("virtio-rng");
  snap::ByteWriter rng;
  RngKind::encode(rng, RngSpec{});
  w.blob(rng.data());
  w.blob({});
  auto bytes = w.take();

  snap::ByteReader r(bytes, "machine");
  auto m = snap::decode_machine_state_version(r, 2);
  ASSERT_TRUE(m) << m.error().message();
  ASSERT_EQ(m->devices.size(), 2u);
  expect_same(std::get<DiskSpec>(m->devices[0].spec), pre_v5_image_disk());
  EXPECT_EQ(m->devices[0].facts, facts.data());
  EXPECT_EQ(device_kind(m->devices[1].spec), "virtio-rng");
  // Read as the current version, the disk record is short of its socket: refused, not misread.
  snap::ByteReader r3(bytes, "machine");
  EXPECT_FALSE(snap::decode_machine_state(r3));
}

TEST(DiskKind, MachineSectionCarriesTheSocket) {
  snap::MachineState m;
  m.memory_bytes = 512ull << 20;
  m.vcpus = 4;
  m.devices.push_back({DeviceSpec(std::in_place_type<DiskSpec>, vhost_user_disk()), {}});
  snap::ByteWriter w;
  snap::encode_machine_state(w, m);
  auto bytes = w.take();
  snap::ByteReader r(bytes, "machine");
  auto back = snap::decode_machine_state(r);
  ASSERT_TRUE(back) << back.error().message();
  ASSERT_EQ(back->devices.size(), 1u);
  expect_same(std::get<DiskSpec>(back->devices[0].spec), vhost_user_disk());
  EXPECT_TRUE(back->devices[0].facts.empty());
}

// A snapshot is untrusted: a vhost-user spec that also names an image (or any back-end field)
// is refused, naming the key.
TEST(DiskKind, DecodeRefusesAVhostUserSpecWithBackendFields) {
  auto refused = [](DiskSpec d, const std::string& key) {
    auto back = round_trip(d);
    ASSERT_FALSE(back) << key;
    EXPECT_NE(back.error().message().find("--disk " + key), std::string::npos)
        << back.error().message();
  };
  DiskSpec d = vhost_user_disk();
  d.path = "/img";
  refused(d, "path");
  d = vhost_user_disk();
  d.read_only = true;
  refused(d, "readonly");
  d = vhost_user_disk();
  d.cache = CacheMode::kUnsafe;
  refused(d, "cache");
  d = vhost_user_disk();
  d.serial = "x";
  refused(d, "serial");
  d = vhost_user_disk();
  d.engine = IoEngineKind::kThreads;
  refused(d, "io");
  d = vhost_user_disk();
  d.vhost_user_socket = std::string(200, 's');
  EXPECT_FALSE(round_trip(d));
}

// A tampered snapshot: tuning out of range (QueueWorker::start would abort on it) or on a
// vhost-user disk is refused at decode, naming the --disk key.
TEST(DiskKind, DecodeRefusesTamperedTuning) {
  auto refused = [](DiskSpec d, const std::string& what) {
    auto back = round_trip(d);
    ASSERT_FALSE(back) << what;
    EXPECT_NE(back.error().message().find(what), std::string::npos) << back.error().message();
  };
  DiskSpec d = image_disk();
  d.coalesce_us = 10'001;
  refused(d, "--disk coalesce_us=10001: must be 0..10000");
  d = image_disk();
  d.poll_us = UINT32_MAX;
  refused(d, "--disk poll_us=4294967295: must be 0..10000");
  d = vhost_user_disk();
  d.kick_suppress = false;
  refused(d, "--disk kick_suppress");
  d = vhost_user_disk();
  d.poll_us = 5;
  refused(d, "--disk poll_us");
}

TEST(DiskKind, VhostUserDiskHasNoFactsFilesOrFlush) {
  testing::FakeVirtioDevice dev;  // not a VirtioBlock: never taken for one
  const DiskSpec s = vhost_user_disk();
  snap::ByteWriter w;
  DiskKind::save_facts(w, s, dev);
  EXPECT_TRUE(w.data().empty());
  snap::ByteReader none(w.data(), "facts");
  EXPECT_TRUE(DiskKind::check_facts(none, s, dev));
  std::vector<uint8_t> stray{1, 2, 3, 4, 5, 6, 7, 8};
  snap::ByteReader some(stray, "facts");
  EXPECT_FALSE(DiskKind::check_facts(some, s, dev));  // an image size where none belongs
  auto files = DiskKind::protected_files(dev, 0);
  ASSERT_TRUE(files) << files.error().message();
  EXPECT_TRUE(files->empty());
  EXPECT_TRUE(DiskKind::flush(dev));
}

TEST(DiskKind, ImageDiskKeepsItsFacts) {
  tern::testing::TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  DiskSpec s;
  s.path = dir.path() + "/disk.img";
  {
    UniqueFd fd(::open(s.path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
    ASSERT_TRUE(fd.valid());
    ASSERT_EQ(::ftruncate(fd.get(), 1 << 20), 0);
  }
  auto dev = DiskKind::make(s, "virtio-blk0");
  ASSERT_TRUE(dev) << dev.error().message();
  snap::ByteWriter w;
  DiskKind::save_facts(w, s, **dev);
  snap::ByteReader r(w.data(), "facts");
  auto size = r.u64();
  ASSERT_TRUE(size);
  EXPECT_EQ(*size, 1u << 20);
  snap::ByteReader again(w.data(), "facts");
  EXPECT_TRUE(DiskKind::check_facts(again, s, **dev));
  auto files = DiskKind::protected_files(**dev, 0);
  ASSERT_TRUE(files) << files.error().message();
  EXPECT_EQ(files->size(), 1u);
  EXPECT_TRUE(DiskKind::flush(**dev));

  // A restore reopens the image: refused by name while the saving disk holds its lock, made once
  // that disk is gone.
  std::vector<SavedDevice> saved{{DeviceSpec(std::in_place_type<DiskSpec>, s), w.data()}};
  auto busy = make_restored_devices(saved);
  ASSERT_FALSE(busy);
  EXPECT_EQ(busy.error().message(),
            "snapshot disk 0: --disk path=" + s.path +
                ": in use by another disk of this VM (it holds a write lock on it); give each "
                "disk its own image, or restore once the VM that saved the snapshot has ended "
                "(tern snapshot --exit)");
  dev->reset();
  auto restored = make_restored_devices(saved);
  EXPECT_TRUE(restored) << restored.error().message();
}

// The front-end's failure to reach the back-end names the option, for every surface.
TEST(DiskKind, VhostUserErrorsNameTheOption) {
  tern::testing::TempDir dir;
  DiskSpec s;
  s.vhost_user_socket = dir.path() + "/absent.sock";
  auto dev = DiskKind::make(s, "virtio-blk0");
  ASSERT_FALSE(dev);
  const std::string msg = dev.error().message();
  EXPECT_TRUE(msg.starts_with("--disk vhost-user=" + s.vhost_user_socket + ": ")) << msg;
  // A spec the validation refuses already names its --disk key: not prefixed twice.
  DiskSpec both = s;
  both.path = "/img";
  auto refused = DiskKind::make(both, "virtio-blk0");
  ASSERT_FALSE(refused);
  EXPECT_TRUE(refused.error().message().starts_with("--disk path: not with vhost-user="))
      << refused.error().message();
  // Restore names the snapshot's disk first.
  std::vector<SavedDevice> saved{{DeviceSpec(std::in_place_type<DiskSpec>, s), {}}};
  auto restored = make_restored_devices(saved);
  ASSERT_FALSE(restored);
  EXPECT_NE(restored.error().message().find("snapshot disk 0: --disk vhost-user="),
            std::string::npos)
      << restored.error().message();
}

}  // namespace
}  // namespace tern
