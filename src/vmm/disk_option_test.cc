#include "vmm/disk_option.h"

#include <gtest/gtest.h>

#include "base/testing/temp_dir.h"

namespace tern {
namespace {

TEST(DiskOptionTest, ParsesEveryKey) {
  auto c = parse_disk_option("path=/tmp/a.img,cache=none,readonly=on,serial=ABC-1,queues=4,io=threads");
  ASSERT_TRUE(c) << c.error().message();
  EXPECT_EQ(c->path, "/tmp/a.img");
  EXPECT_EQ(c->cache, CacheMode::kNone);
  EXPECT_TRUE(c->read_only);
  EXPECT_EQ(c->serial, "ABC-1");
  EXPECT_EQ(c->queues, 4);
  EXPECT_EQ(c->engine, IoEngineKind::kThreads);
}

// A relative image path is kept absolute: GET /vm/config and a snapshot's machine section name
// the image, so `tern restore` run from another directory finds it (issue 31 item 13).
// format= and backing_files= (docs/disk-images.md, "Image formats"): named in every refusal.
TEST(DiskOptionTest, FormatAndBackingFiles) {
  auto c = parse_disk_option("path=/d.img");
  ASSERT_TRUE(c) << c.error().message();
  EXPECT_EQ(c->format, DiskFormat::kAuto);
  EXPECT_FALSE(c->backing_files);
  c = parse_disk_option("path=/d.qcow2,format=qcow2,backing_files=on");
  ASSERT_TRUE(c) << c.error().message();
  EXPECT_EQ(c->format, DiskFormat::kQcow2);
  EXPECT_TRUE(c->backing_files);
  c = parse_disk_option("path=/d.img,format=raw");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->format, DiskFormat::kRaw);
  auto bad = parse_disk_option("path=/d.img,format=vmdk");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message(), "--disk format=vmdk: unknown image format (raw, qcow2)");
  bad = parse_disk_option("path=/d.img,backing_files=yes");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message(), "--disk backing_files=yes: must be on or off");
  bad = parse_disk_option("vhost-user=/s.sock,format=raw");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message(), "--disk format: not with vhost-user= (the image format is the back-end's)");
}

TEST(DiskOptionTest, RelativePathIsKeptAbsolute) {
  testing::TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string cwd = std::filesystem::canonical(dir.path()).string();
  testing::ScopedWorkingDirectory in(dir.path());
  for (const char* given : {"path=disk.raw", "path=./disk.raw", "path=.//./disk.raw"}) {
    auto c = parse_disk_option(given);
    ASSERT_TRUE(c) << c.error().message();
    EXPECT_EQ(c->path, cwd + "/disk.raw") << given;
  }
  auto sub = parse_disk_option("path=img/../disk.raw,interface=nvme");
  ASSERT_TRUE(sub) << sub.error().message();
  EXPECT_EQ(sub->path, cwd + "/img/../disk.raw");  // the kernel resolves "..", as before
  auto abs = parse_disk_option("path=/srv/x.img");
  ASSERT_TRUE(abs);
  EXPECT_EQ(abs->path, "/srv/x.img");
  auto socket = parse_disk_option("vhost-user=blk.sock");
  ASSERT_TRUE(socket) << socket.error().message();
  EXPECT_EQ(socket->vhost_user_socket, cwd + "/blk.sock");
  EXPECT_TRUE(socket->path.empty());
}

// A relative socket that fits sun_path as given but not once made absolute is refused by name.
TEST(DiskOptionTest, RelativeSocketTooLongOnceAbsoluteIsRefused) {
  testing::TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  testing::ScopedWorkingDirectory in(dir.path());
  const std::string name(kMaxVhostUserSocketBytes - 1, 's');
  auto c = parse_disk_option("vhost-user=" + name);
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message().find("--disk vhost-user="), std::string::npos) << c.error().message();
  EXPECT_NE(c.error().message().find("longer than"), std::string::npos) << c.error().message();
}

TEST(DiskOptionTest, Locking) {
  auto c = parse_disk_option("path=disk.raw");
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->locking);
  c = parse_disk_option("path=disk.raw,locking=off");
  ASSERT_TRUE(c) << c.error().message();
  EXPECT_FALSE(c->locking);
  c = parse_disk_option("locking=on,path=disk.raw,interface=nvme");
  ASSERT_TRUE(c) << c.error().message();
  EXPECT_TRUE(c->locking);
  auto bad = parse_disk_option("path=disk.raw,locking=no");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message(), "--disk locking=no: must be on or off");
  auto unknown = parse_disk_option("path=disk.raw,lock=off");
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message().find("locking"), std::string::npos);
}

// The notification tuning (virtio/notify_tuning.h): on/off and 0..10000 µs, refused where the
// queues are not tern's virtio-blk queues (vhost-user, NVMe), every error naming its key.
TEST(DiskOptionTest, NotifyTuning) {
  auto c = parse_disk_option("path=disk.raw,kick_suppress=on,coalesce_us=50,poll_us=10000");
  ASSERT_TRUE(c) << c.error().message();
  EXPECT_TRUE(c->kick_suppress);
  EXPECT_EQ(c->coalesce_us, 50u);
  EXPECT_EQ(c->poll_us, 10000u);
  auto msg = [](std::string_view s) {
    auto d = parse_disk_option(s);
    return d ? std::string("(ok)") : d.error().message();
  };
  EXPECT_EQ(msg("path=a,kick_suppress=yes"), "--disk kick_suppress=yes: must be on or off");
  EXPECT_EQ(msg("path=a,coalesce_us=10001"),
            "--disk coalesce_us=10001: must be a number of µs in 0..10000");
  EXPECT_EQ(msg("path=a,poll_us=-1"), "--disk poll_us=-1: must be a number of µs in 0..10000");
  EXPECT_EQ(msg("path=a,poll_us="), "--disk poll_us=: must be a number of µs in 0..10000");
  EXPECT_EQ(msg("path=a,interface=nvme,coalesce_us=5"),
            "--disk coalesce_us: not with interface=nvme (virtio-blk only)");
  EXPECT_NE(msg("vhost-user=/tmp/s,poll_us=5").find("--disk poll_us: not with vhost-user="),
            std::string::npos);
  EXPECT_NE(msg("vhost-user=/tmp/s,kick_suppress=off").find("--disk kick_suppress"),
            std::string::npos);
}

TEST(DiskOptionTest, DefaultsWithPathOnly) {
  auto c = parse_disk_option("path=disk.raw");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->cache, CacheMode::kWriteback);
  EXPECT_FALSE(c->read_only);
  EXPECT_EQ(c->queues, 1);
  EXPECT_EQ(c->engine, IoEngineKind::kIoUring);
}

TEST(DiskOptionTest, ErrorsNameTheField) {
  auto msg = [](std::string_view s) {
    auto c = parse_disk_option(s);
    return c ? std::string("(ok)") : c.error().message();
  };
  EXPECT_NE(msg("cache=none").find("--disk path"), std::string::npos);
  EXPECT_NE(msg("path=a,cache=fast").find("--disk cache=fast"), std::string::npos);
  EXPECT_NE(msg("path=a,readonly=yes").find("--disk readonly=yes"), std::string::npos);
  EXPECT_NE(msg("path=a,queues=0").find("--disk queues=0"), std::string::npos);
  EXPECT_NE(msg("path=a,queues=65").find("--disk queues=65"), std::string::npos);
  EXPECT_NE(msg("path=a,queues=2x").find("--disk queues=2x"), std::string::npos);
  EXPECT_NE(msg("path=a,io=aio").find("--disk io=aio"), std::string::npos);
  EXPECT_NE(msg("path=a,serial=123456789012345678901").find("--disk serial="), std::string::npos);
  // Named for the interface, whichever order the keys come in (it named virtio for NVMe disks).
  EXPECT_NE(msg("path=a,serial=123456789012345678901,interface=nvme").find("NVMe"),
            std::string::npos);
  EXPECT_NE(msg("path=a,size=1G").find("--disk size"), std::string::npos);
  EXPECT_NE(msg("path=a,path=b").find("more than once"), std::string::npos);
  EXPECT_NE(msg("disk.img").find("not key=value"), std::string::npos);
  EXPECT_NE(msg("path=a,").find("not key=value"), std::string::npos);
  EXPECT_NE(msg("path=").find("--disk path"), std::string::npos);
  EXPECT_NE(msg("").find("--disk"), std::string::npos);
}

TEST(DiskOptionTest, QueueSize) {
  auto c = parse_disk_option("path=a,queue_size=128");
  ASSERT_TRUE(c) << c.error().message();
  EXPECT_EQ(c->queue_size, 128);
  for (const char* bad : {"path=a,queue_size=100", "path=a,queue_size=1", "path=a,queue_size=2048",
                          "path=a,queue_size=", "path=a,queue_size=x"}) {
    auto e = parse_disk_option(bad);
    ASSERT_FALSE(e) << bad;
    EXPECT_NE(e.error().message().find("--disk queue_size="), std::string::npos)
        << e.error().message();
  }
}

TEST(DiskOptionTest, VhostUser) {
  auto c = parse_disk_option("vhost-user=/tmp/vu.sock,queues=2,queue_size=512");
  ASSERT_TRUE(c) << c.error().message();
  EXPECT_EQ(c->vhost_user_socket, "/tmp/vu.sock");
  EXPECT_TRUE(c->path.empty());
  EXPECT_EQ(c->queues, 2);
  EXPECT_EQ(c->queue_size, 512);
  // The back-end's fields stay at their defaults (validate_disk_config requires it).
  const DiskConfig defaults;
  EXPECT_EQ(c->cache, defaults.cache);
  EXPECT_EQ(c->engine, defaults.engine);
  EXPECT_FALSE(c->read_only);
  EXPECT_TRUE(c->serial.empty());

  auto alone = parse_disk_option("vhost-user=vu.sock");
  ASSERT_TRUE(alone) << alone.error().message();
  EXPECT_EQ(alone->queues, 1);
}

// Every key a vhost-user disk leaves to its back-end is refused by name, even at its default
// value, and the error says whose it is.
TEST(DiskOptionTest, VhostUserRefusesTheBackendsKeys) {
  for (const char* key : {"path=disk.img", "cache=writeback", "cache=none", "readonly=off",
                          "readonly=on", "serial=S1", "io=io_uring", "io=threads",
                          "locking=on", "locking=off"}) {
    std::string spec = std::string("vhost-user=/tmp/vu.sock,") + key;
    std::string name(key, std::string_view(key).find('='));
    for (const std::string& s : {spec, std::string(key) + ",vhost-user=/tmp/vu.sock"}) {
      auto c = parse_disk_option(s);
      ASSERT_FALSE(c) << s;
      EXPECT_TRUE(c.error().message().starts_with("--disk " + name + ": not with vhost-user="))
          << c.error().message();
      EXPECT_NE(c.error().message().find("back-end's"), std::string::npos) << c.error().message();
    }
  }
}

TEST(DiskOptionTest, VhostUserSocketPath) {
  auto msg = [](const std::string& s) {
    auto c = parse_disk_option(s);
    return c ? std::string("(ok)") : c.error().message();
  };
  EXPECT_EQ(msg("vhost-user="), "--disk vhost-user: empty socket path");
  EXPECT_NE(msg("vhost-user=" + std::string(108, 'a')).find("longer than 107 bytes"),
            std::string::npos);
  EXPECT_EQ(msg("vhost-user=/" + std::string(106, 'a')), "(ok)");
  EXPECT_NE(msg("vhost-user=a,vhost-user=b").find("more than once"), std::string::npos);
  EXPECT_NE(msg("vhost-user=a,queues=65").find("--disk queues=65"), std::string::npos);
  EXPECT_NE(msg("vhost-user=a,queue_size=3").find("--disk queue_size=3"), std::string::npos);
  // Neither key: the error names both ways.
  EXPECT_NE(msg("queues=2").find("vhost-user=SOCKET"), std::string::npos);
}

// validate_disk_config (the API, the config file and snapshots reach it without the parser):
// the same refusals by the value of each back-end field.
TEST(DiskOptionTest, ValidateRefusesVhostUserWithBackendFields) {
  DiskConfig c;
  c.vhost_user_socket = "/tmp/vu.sock";
  EXPECT_TRUE(validate_disk_config(c));
  auto refused = [](DiskConfig d, const std::string& key) {
    auto r = validate_disk_config(d);
    ASSERT_FALSE(r) << key;
    EXPECT_TRUE(r.error().message().starts_with("--disk " + key + ": not with vhost-user="))
        << r.error().message();
  };
  DiskConfig d = c;
  d.path = "x";
  refused(d, "path");
  d = c;
  d.cache = CacheMode::kNone;
  refused(d, "cache");
  d = c;
  d.read_only = true;
  refused(d, "readonly");
  d = c;
  d.serial = "s";
  refused(d, "serial");
  d = c;
  d.engine = IoEngineKind::kThreads;
  refused(d, "io");
  d = c;
  d.locking = false;
  refused(d, "locking");
  d = c;
  d.vhost_user_socket = std::string("a\0b", 3);
  EXPECT_FALSE(validate_disk_config(d));
}

TEST(DiskOptionTest, NvmeInterface) {
  auto c = parse_disk_option("path=/img/a.raw,interface=nvme,cache=none,readonly=on,serial=N1,io=threads");
  ASSERT_TRUE(c) << c.error().message();
  EXPECT_EQ(c->interface, DiskInterface::kNvme);
  EXPECT_EQ(c->cache, CacheMode::kNone);
  EXPECT_TRUE(c->read_only);
  EXPECT_EQ(c->serial, "N1");
  EXPECT_EQ(c->engine, IoEngineKind::kThreads);
  auto v = parse_disk_option("path=/img/a.raw,interface=virtio");
  ASSERT_TRUE(v);
  EXPECT_EQ(v->interface, DiskInterface::kVirtio);
  EXPECT_EQ(parse_disk_option("path=/img/a.raw")->interface, DiskInterface::kVirtio);
}

TEST(DiskOptionTest, NvmeRefusesVirtioKeys) {
  auto msg = [](std::string_view s) {
    auto c = parse_disk_option(s);
    return c ? std::string("(ok)") : c.error().message();
  };
  EXPECT_NE(msg("path=a,interface=scsi").find("--disk interface=scsi: unknown disk interface"),
            std::string::npos);
  EXPECT_NE(msg("path=a,interface=").find("--disk interface="), std::string::npos);
  // Refused even at the default value: the user meant something by it.
  EXPECT_NE(msg("path=a,interface=nvme,queues=1").find("--disk queues: not with interface=nvme"),
            std::string::npos);
  EXPECT_NE(msg("path=a,queue_size=128,interface=nvme").find("--disk queue_size: not with interface=nvme"),
            std::string::npos);
  EXPECT_NE(msg("vhost-user=/s,interface=nvme").find("--disk interface=nvme: not with vhost-user="),
            std::string::npos);
  EXPECT_NE(msg("path=a,interface=nvme,interface=virtio").find("interface"), std::string::npos);
}

TEST(DiskOptionTest, ValidateRefusesNvmeCombinations) {
  DiskConfig d;
  d.path = "a";
  d.interface = DiskInterface::kNvme;
  EXPECT_TRUE(validate_disk_config(d));
  d.queues = 2;
  auto e = validate_disk_config(d);
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().message().find("--disk queues: not with interface=nvme"), std::string::npos);
  d.queues = 1;
  d.queue_size = 128;
  EXPECT_FALSE(validate_disk_config(d));
  d.queue_size = 256;
  d.path.clear();
  d.vhost_user_socket = "/s";
  e = validate_disk_config(d);
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().message().find("--disk interface=nvme: not with vhost-user="),
            std::string::npos);
  d.interface = static_cast<DiskInterface>(7);
  EXPECT_FALSE(validate_disk_config(d));
}

TEST(DiskOptionTest, InterfaceNames) {
  EXPECT_EQ(disk_interface_name(DiskInterface::kVirtio), "virtio");
  EXPECT_EQ(disk_interface_name(DiskInterface::kNvme), "nvme");
  EXPECT_EQ(*parse_disk_interface("nvme"), DiskInterface::kNvme);
  EXPECT_FALSE(parse_disk_interface("NVMe"));
}

}  // namespace
}  // namespace tern
