// A hostile back-end against the front-end's Channel: each test is one thing a peer could do.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "base/testing/temp_dir.h"
#include "base/fd.h"
#include "vhost_user/vhost_user_channel.h"

namespace tern::vhost_user {
namespace {

// A back-end that listens but never accepts, its backlog full: connect used to block forever
// (with the device's lock held, a vCPU resetting the device hung too). Now it fails at once.
TEST(VhostUserChannelAttack, ConnectToAListenerThatNeverAcceptsFails) {
  tern::testing::TempDir dir;
  const std::string path = dir.path() + "/full.sock";
  UniqueFd l(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path, path.data(), path.size());
  ASSERT_EQ(::bind(l.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(l.get(), 0), 0);
  std::vector<UniqueFd> pending;  // fill the backlog
  for (int i = 0; i < 64; ++i) {
    UniqueFd c(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (::connect(c.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) break;
    pending.push_back(std::move(c));
  }
  ASSERT_LT(pending.size(), 64u);
  auto ch = Channel::connect(path);
  ASSERT_FALSE(ch.has_value());
  EXPECT_NE(ch.error().message().find("backlog"), std::string::npos) << ch.error().message();
}

}  // namespace
}  // namespace tern::vhost_user
