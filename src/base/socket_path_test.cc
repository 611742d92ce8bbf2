#include "base/socket_path.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "base/fd.h"
#include "base/testing/temp_dir.h"

namespace tern {
namespace {

UniqueFd bind_at(const std::string& path) {
  UniqueFd s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);
  EXPECT_EQ(::bind(s.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0) << path;
  return s;
}

bool exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

TEST(BoundSocketPath, RemovesItsOwnSocketFile) {
  testing::TempDir dir;
  std::string path = dir.path() + "/s.sock";
  UniqueFd s = bind_at(path);
  auto b = BoundSocketPath::after_bind(path, "test");
  ASSERT_TRUE(b) << b.error().message();
  EXPECT_TRUE(b->remove());
  EXPECT_FALSE(exists(path));
  EXPECT_FALSE(b->remove());  // once
}

TEST(BoundSocketPath, LeavesAFileBoundThereSince) {
  testing::TempDir dir;
  std::string path = dir.path() + "/s.sock";
  UniqueFd first = bind_at(path);
  auto b = BoundSocketPath::after_bind(path, "test");
  ASSERT_TRUE(b);
  ASSERT_EQ(::unlink(path.c_str()), 0);
  UniqueFd second = bind_at(path);
  EXPECT_FALSE(b->remove());
  EXPECT_TRUE(exists(path));
}

TEST(BoundSocketPath, AMovedFromValueRemovesNothing) {
  testing::TempDir dir;
  std::string path = dir.path() + "/s.sock";
  UniqueFd s = bind_at(path);
  auto b = BoundSocketPath::after_bind(path, "test");
  ASSERT_TRUE(b);
  BoundSocketPath taken = std::move(*b);
  EXPECT_FALSE(b->remove());
  EXPECT_TRUE(exists(path));
  EXPECT_TRUE(taken.remove());
}

TEST(BoundSocketPath, NamesTheOperationWhenThePathIsMissing) {
  auto b = BoundSocketPath::after_bind("/nonexistent-dir/s.sock", "--api-sock");
  ASSERT_FALSE(b);
  EXPECT_NE(b.error().message().find("--api-sock"), std::string::npos);
}

}  // namespace
}  // namespace tern
