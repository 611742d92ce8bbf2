#include "vhost_user/vhost_user_channel.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include "base/testing/temp_dir.h"
#include "vhost_user/testing/channel_pair.h"

namespace tern::vhost_user {
namespace {

using namespace std::chrono_literals;
using testing::ChannelPair;
using testing::make_channel_pair;
using testing::send_raw;

template <class T>
void expect_round_trip(uint32_t request, const T& body) {
  ChannelPair p = make_channel_pair();
  ASSERT_TRUE(p.a.send(make_request(request, body, true)));
  auto m = p.b.recv(1s);
  ASSERT_TRUE(m) << m.error().message();
  EXPECT_EQ(m->hdr.request, request);
  EXPECT_EQ(m->hdr.flags, VHOST_USER_VERSION | VHOST_USER_NEED_REPLY_MASK);
  ASSERT_EQ(m->hdr.size, sizeof(T));
  ASSERT_EQ(m->payload.size(), sizeof(T));
  EXPECT_EQ(std::memcmp(m->payload.data(), &body, sizeof(T)), 0);
  EXPECT_TRUE(m->fds.empty());
}

TEST(VhostUserChannel, RoundTripsEveryPayloadType) {
  expect_round_trip(VHOST_USER_SET_FEATURES, VhostUserU64{0x1234'5678'9abc'def0});
  expect_round_trip(VHOST_USER_SET_VRING_NUM, VhostVringState{3, 256});
  expect_round_trip(VHOST_USER_SET_VRING_ADDR, VhostVringAddr{1, 0, 0x1000, 0x2000, 0x3000, 0});
  VhostUserMemory mem;
  mem.nregions = VHOST_MEMORY_BASELINE_NREGIONS;
  for (uint32_t i = 0; i < mem.nregions; ++i) mem.regions[i] = {i << 20, 1 << 20, 0x7f00 + i, 0};
  expect_round_trip(VHOST_USER_SET_MEM_TABLE, mem);
  expect_round_trip(VHOST_USER_ADD_MEM_REG, VhostUserMemRegMsg{0, {0, 4096, 0x7000, 8192}});
  struct {
    VhostUserConfigHeader h{0, 4, 0};
    uint8_t data[4] = {1, 2, 3, 4};
  } config;
  expect_round_trip(VHOST_USER_SET_CONFIG, config);
  expect_round_trip(VHOST_USER_SET_INFLIGHT_FD, VhostUserInflight{8192, 0, 2, 128});
}

TEST(VhostUserChannel, RoundTripsAnEmptyPayloadAndAReply) {
  ChannelPair p = make_channel_pair();
  ASSERT_TRUE(p.a.send(make_request(VHOST_USER_GET_FEATURES, std::span<const uint8_t>{})));
  auto m = p.b.recv(1s);
  ASSERT_TRUE(m) << m.error().message();
  EXPECT_EQ(m->hdr.size, 0u);
  EXPECT_TRUE(m->payload.empty());
  uint64_t f = 42;
  ASSERT_TRUE(p.b.send(make_reply(VHOST_USER_GET_FEATURES,
                                  {reinterpret_cast<const uint8_t*>(&f), sizeof f})));
  auto r = p.a.recv(1s);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->hdr.flags, VHOST_USER_VERSION | VHOST_USER_REPLY_MASK);
  auto v = parse_u64_reply(*r, VHOST_USER_GET_FEATURES);
  ASSERT_TRUE(v) << v.error().message();
  EXPECT_EQ(*v, 42u);
}

TEST(VhostUserChannel, PassesFds) {
  ChannelPair p = make_channel_pair();
  int pipefd[2];
  ASSERT_EQ(::pipe(pipefd), 0);
  UniqueFd r(pipefd[0]), w(pipefd[1]);
  int fds[2] = {r.get(), w.get()};
  ASSERT_TRUE(p.a.send(make_request(VHOST_USER_SET_VRING_KICK, VhostUserU64{0}), fds));
  auto m = p.b.recv(1s);
  ASSERT_TRUE(m) << m.error().message();
  ASSERT_EQ(m->fds.size(), 2u);
  EXPECT_TRUE(::fcntl(m->fds[0].get(), F_GETFD) & FD_CLOEXEC);  // MSG_CMSG_CLOEXEC
  // The received write end reaches the original read end.
  ASSERT_EQ(::write(m->fds[1].get(), "x", 1), 1);
  char c = 0;
  ASSERT_EQ(::read(r.get(), &c, 1), 1);
  EXPECT_EQ(c, 'x');
}

TEST(VhostUserChannel, RefusesAnOversizedHeader) {
  ChannelPair p = make_channel_pair();
  VhostUserHeader h{VHOST_USER_SET_MEM_TABLE, VHOST_USER_VERSION, kMaxPayload + 1};
  ASSERT_TRUE(send_raw(p.a.fd().get(), &h, sizeof h, {}));
  auto m = p.b.recv(1s);
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message().find("at most 4096"), std::string::npos) << m.error().message();
}

TEST(VhostUserChannel, RefusesAndClosesTooManyFds) {
  ChannelPair p = make_channel_pair();
  int pipefd[2];
  ASSERT_EQ(::pipe(pipefd), 0);
  UniqueFd r(pipefd[0]);
  std::vector<int> fds(kMaxFds + 4, pipefd[1]);
  VhostUserHeader h{VHOST_USER_SET_MEM_TABLE, VHOST_USER_VERSION, 0};
  ASSERT_TRUE(send_raw(p.a.fd().get(), &h, sizeof h, fds));
  ::close(pipefd[1]);  // now only the copies in flight hold the write end
  auto m = p.b.recv(1s);
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message().find("fds"), std::string::npos) << m.error().message();
  // Every copy was closed: the read end sees EOF.
  char c;
  EXPECT_EQ(::read(r.get(), &c, 1), 0);
}

TEST(VhostUserChannel, ReportsThePeerClosing) {
  ChannelPair p = make_channel_pair();
  p.a = Channel(UniqueFd());
  auto m = p.b.recv(1s);
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().message(), "vhost-user: peer closed the connection");
  // Sending to a closed peer is an error, not SIGPIPE.
  auto s = p.b.send(make_request(VHOST_USER_SET_OWNER, std::span<const uint8_t>{}));
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message().find("peer closed"), std::string::npos) << s.error().message();
}

TEST(VhostUserChannel, ReportsAPeerClosingMidMessage) {
  ChannelPair p = make_channel_pair();
  VhostUserHeader h{VHOST_USER_SET_FEATURES, VHOST_USER_VERSION, 8};
  ASSERT_TRUE(send_raw(p.a.fd().get(), &h, sizeof h, {}));
  p.a = Channel(UniqueFd());
  auto m = p.b.recv(1s);
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message().find("middle of a message"), std::string::npos)
      << m.error().message();
}

TEST(VhostUserChannel, TimesOut) {
  ChannelPair p = make_channel_pair();
  auto m = p.b.recv(1ms);
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().errnum, ETIMEDOUT);
  EXPECT_EQ(m.error().context, "no message in 1 ms");
}

TEST(VhostUserChannel, ASendToAPeerThatStoppedReadingFails) {
  ChannelPair p = make_channel_pair();
  p.a.set_send_timeout(1ms);
  std::vector<uint8_t> body(kMaxPayload);
  Result<void> r;
  for (int i = 0; i < 100000 && r; ++i) r = p.a.send(make_request(VHOST_USER_SET_CONFIG, body));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().errnum, ETIMEDOUT);
  EXPECT_EQ(r.error().context, "peer took no bytes for 1 ms");
}

TEST(VhostUserChannel, RefusesToSendTooMuch) {
  ChannelPair p = make_channel_pair();
  std::vector<uint8_t> big(kMaxPayload + 1);
  EXPECT_FALSE(p.a.send(make_request(VHOST_USER_SET_CONFIG, big)));
  std::vector<int> fds(kMaxFds + 1, 0);
  EXPECT_FALSE(p.a.send(make_request(VHOST_USER_SET_OWNER, std::span<const uint8_t>{}), fds));
}

TEST(VhostUserListener, AcceptsAConnectionAndUnlinksOnDestruction) {
  tern::testing::TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  std::string path = dir.path() + "/vu.sock";
  {
    auto l = Listener::listen(path);
    ASSERT_TRUE(l) << l.error().message();
    auto c = Channel::connect(path);
    ASSERT_TRUE(c) << c.error().message();
    auto s = l->accept();
    ASSERT_TRUE(s) << s.error().message();
    ASSERT_TRUE(c->send(make_request(VHOST_USER_SET_FEATURES, VhostUserU64{7})));
    auto m = s->recv(1s);
    ASSERT_TRUE(m) << m.error().message();
    EXPECT_EQ(m->hdr.request, VHOST_USER_SET_FEATURES);
  }
  struct stat st;
  EXPECT_NE(::lstat(path.c_str(), &st), 0);
}

TEST(VhostUserListener, ReplacesAStaleSocketButNotALiveOne) {
  tern::testing::TempDir dir;
  std::string path = dir.path() + "/vu.sock";
  {
    auto first = Listener::listen(path);
    ASSERT_TRUE(first) << first.error().message();
    auto second = Listener::listen(path);
    ASSERT_FALSE(second);
    EXPECT_NE(second.error().message().find("another process"), std::string::npos);
    // A dead process leaves its socket file behind: simulate by leaking the file.
    std::string kept = path + ".kept";
    ASSERT_EQ(::link(path.c_str(), kept.c_str()), 0);
  }
  ASSERT_EQ(::rename((path + ".kept").c_str(), path.c_str()), 0);
  auto again = Listener::listen(path);
  ASSERT_TRUE(again) << again.error().message();
  EXPECT_TRUE(Channel::connect(path));
}

// After an `rm` of the path and another back-end listening there, the first one's end leaves the
// second one's socket in place (issue 31 item 14: the same rule as the API socket).
TEST(VhostUserListener, EndLeavesASocketAnotherListenerBoundAtThePath) {
  tern::testing::TempDir dir;
  std::string path = dir.path() + "/vu.sock";
  auto first = Listener::listen(path);
  ASSERT_TRUE(first) << first.error().message();
  ASSERT_EQ(::unlink(path.c_str()), 0);
  auto second = Listener::listen(path);
  ASSERT_TRUE(second) << second.error().message();
  first = fail("ended");  // the first listener goes away
  struct stat st;
  ASSERT_EQ(::lstat(path.c_str(), &st), 0) << "the first listener removed the second one's socket";
  auto c = Channel::connect(path);
  ASSERT_TRUE(c) << c.error().message();
  EXPECT_TRUE(second->accept());
}

TEST(VhostUserListener, RefusesANonSocketFile) {
  tern::testing::TempDir dir;
  std::string path = dir.path() + "/disk.img";
  std::ofstream(path) << "data";
  auto l = Listener::listen(path);
  ASSERT_FALSE(l);
  EXPECT_NE(l.error().message().find(path), std::string::npos);
  EXPECT_NE(l.error().message().find("not a socket"), std::string::npos);
  std::ifstream in(path);
  std::string s;
  in >> s;
  EXPECT_EQ(s, "data");
}

TEST(VhostUserChannel, ConnectNamesThePath) {
  auto c = Channel::connect("/nonexistent/vu.sock");
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message().find("/nonexistent/vu.sock"), std::string::npos);
}

TEST(VhostUserMessage, RequestNames) {
  EXPECT_STREQ(request_name(VHOST_USER_GET_FEATURES), "VHOST_USER_GET_FEATURES");
  EXPECT_STREQ(request_name(VHOST_USER_GET_STATUS), "VHOST_USER_GET_STATUS");
  EXPECT_STREQ(request_name(VHOST_USER_GET_CONFIG), "VHOST_USER_GET_CONFIG");
  EXPECT_STREQ(request_name(9999), "request 9999");
}

}  // namespace
}  // namespace tern::vhost_user
