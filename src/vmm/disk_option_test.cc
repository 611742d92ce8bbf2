#include "vmm/disk_option.h"

#include <gtest/gtest.h>

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
                          "readonly=on", "serial=S1", "io=io_uring", "io=threads"}) {
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
  EXPECT_EQ(msg("vhost-user=" + std::string(107, 'a')), "(ok)");
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
  d.vhost_user_socket = std::string("a\0b", 3);
  EXPECT_FALSE(validate_disk_config(d));
}

}  // namespace
}  // namespace tern
