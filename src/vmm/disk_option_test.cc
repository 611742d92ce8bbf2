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

}  // namespace
}  // namespace tern
