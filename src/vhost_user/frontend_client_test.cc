// FrontendClient against a scripted fake back-end: a thread on the other end of a socketpair that
// checks each request it receives and answers as the script says.
#include "vhost_user/frontend_client.h"

#include <gtest/gtest.h>
#include <sys/eventfd.h>

#include <cstring>
#include <functional>
#include <thread>

#include "vhost_user/testing/channel_pair.h"

namespace tern::vhost_user {
namespace {

using namespace std::chrono_literals;

constexpr auto kWait = 10s;  // a bound for the fake's waits, never reached when tests pass

class FakeBackend {
 public:
  explicit FakeBackend(Channel ch, std::function<void(Channel&)> script)
      : ch_(std::move(ch)), thread_([this, s = std::move(script)] { s(ch_); }) {}
  ~FakeBackend() { thread_.join(); }

 private:
  Channel ch_;
  std::thread thread_;
};

/// Receives one request and checks its code and NEED_REPLY flag.
Message expect_request(Channel& ch, uint32_t request, bool need_reply) {
  auto m = ch.recv(kWait);
  EXPECT_TRUE(m) << m.error().message();
  if (!m) return Message{};
  EXPECT_EQ(m->hdr.request, request) << request_name(m->hdr.request);
  EXPECT_EQ(m->hdr.flags & VHOST_USER_VERSION_MASK, VHOST_USER_VERSION);
  EXPECT_EQ(bool(m->hdr.flags & VHOST_USER_NEED_REPLY_MASK), need_reply)
      << request_name(request);
  return std::move(*m);
}

template <class T>
T body_as(const Message& m) {
  T v{};
  EXPECT_EQ(m.payload.size(), sizeof v);
  std::memcpy(&v, m.payload.data(), std::min(sizeof v, m.payload.size()));
  return v;
}

template <class T>
void reply(Channel& ch, uint32_t request, const T& body, std::span<const int> fds = {}) {
  EXPECT_TRUE(ch.send(make_reply(request, {reinterpret_cast<const uint8_t*>(&body), sizeof body}),
                      fds));
}

/// Waits for the client to go away (so the client's side decides when the test ends).
void until_closed(Channel& ch) {
  auto m = ch.recv(kWait);
  EXPECT_FALSE(m);
}

std::string msg(const Result<void>& r) { return r ? "" : r.error().message(); }
template <class T>
std::string msg(const Result<T>& r) {
  return r ? "" : r.error().message();
}

TEST(FrontendClient, EveryMethodWithoutReplyAck) {
  auto p = testing::make_channel_pair();
  UniqueFd efd(::eventfd(0, EFD_CLOEXEC));
  FakeBackend fake(std::move(p.b), [](Channel& ch) {
    expect_request(ch, VHOST_USER_GET_FEATURES, false);
    reply(ch, VHOST_USER_GET_FEATURES, uint64_t{0x1'4000'0000});
    EXPECT_EQ(body_as<uint64_t>(expect_request(ch, VHOST_USER_SET_FEATURES, false)), 0x4000'0000u);
    expect_request(ch, VHOST_USER_GET_PROTOCOL_FEATURES, false);
    reply(ch, VHOST_USER_GET_PROTOCOL_FEATURES, uint64_t{0x3});
    EXPECT_EQ(body_as<uint64_t>(expect_request(ch, VHOST_USER_SET_PROTOCOL_FEATURES, false)), 1u);
    expect_request(ch, VHOST_USER_GET_QUEUE_NUM, false);
    reply(ch, VHOST_USER_GET_QUEUE_NUM, uint64_t{4});
    expect_request(ch, VHOST_USER_SET_OWNER, false);
    Message gc = expect_request(ch, VHOST_USER_GET_CONFIG, false);
    EXPECT_EQ(gc.payload.size(), sizeof(VhostUserConfigHeader) + 8);
    struct {
      VhostUserConfigHeader h{0, 8, 0};
      uint8_t d[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    } cfg;
    reply(ch, VHOST_USER_GET_CONFIG, cfg);
    expect_request(ch, VHOST_USER_GET_MAX_MEM_SLOTS, false);
    reply(ch, VHOST_USER_GET_MAX_MEM_SLOTS, uint64_t{32});
    Message mt = expect_request(ch, VHOST_USER_SET_MEM_TABLE, false);
    EXPECT_EQ(mt.payload.size(), 8u + 2 * sizeof(VhostUserMemoryRegion));
    EXPECT_EQ(mt.fds.size(), 2u);
    Message ar = expect_request(ch, VHOST_USER_ADD_MEM_REG, false);
    EXPECT_EQ(body_as<VhostUserMemRegMsg>(ar).region.memory_size, 4096u);
    EXPECT_EQ(ar.fds.size(), 1u);
    auto gi = body_as<VhostUserInflight>(expect_request(ch, VHOST_USER_GET_INFLIGHT_FD, false));
    EXPECT_EQ(gi.num_queues, 2);
    EXPECT_EQ(gi.queue_size, 128);
    UniqueFd mem(::eventfd(0, EFD_CLOEXEC));
    int fds[1] = {mem.get()};
    reply(ch, VHOST_USER_GET_INFLIGHT_FD, VhostUserInflight{4096, 0, 2, 128}, fds);
    EXPECT_EQ(expect_request(ch, VHOST_USER_SET_INFLIGHT_FD, false).fds.size(), 1u);
    auto num = body_as<VhostVringState>(expect_request(ch, VHOST_USER_SET_VRING_NUM, false));
    EXPECT_EQ(num.index, 1u);
    EXPECT_EQ(num.num, 256u);
    auto addr = body_as<VhostVringAddr>(expect_request(ch, VHOST_USER_SET_VRING_ADDR, false));
    EXPECT_EQ(addr.used_user_addr, 0x2000u);
    auto base = body_as<VhostVringState>(expect_request(ch, VHOST_USER_SET_VRING_BASE, false));
    EXPECT_EQ(base.num, 5u);
    Message kick = expect_request(ch, VHOST_USER_SET_VRING_KICK, false);
    EXPECT_EQ(body_as<uint64_t>(kick), 1u);
    EXPECT_EQ(kick.fds.size(), 1u);
    Message call = expect_request(ch, VHOST_USER_SET_VRING_CALL, false);
    EXPECT_EQ(body_as<uint64_t>(call), 1u | VHOST_USER_VRING_NOFD_MASK);
    EXPECT_TRUE(call.fds.empty());
    auto en = body_as<VhostVringState>(expect_request(ch, VHOST_USER_SET_VRING_ENABLE, false));
    EXPECT_EQ(en.num, 1u);
    expect_request(ch, VHOST_USER_GET_VRING_BASE, false);
    reply(ch, VHOST_USER_GET_VRING_BASE, VhostVringState{1, 99});
    expect_request(ch, VHOST_USER_RESET_OWNER, false);  // RESET_DEVICE not negotiated
  });
  FrontendClient c(std::move(p.a), "/run/x.sock");
  EXPECT_EQ(c.get_features().value_or(0), 0x1'4000'0000u);
  EXPECT_TRUE(c.set_features(0x4000'0000));
  EXPECT_EQ(c.get_protocol_features().value_or(0), 3u);
  EXPECT_TRUE(c.set_protocol_features(protocol_feature(VHOST_USER_PROTOCOL_F_MQ)));
  EXPECT_TRUE(c.has_protocol_feature(VHOST_USER_PROTOCOL_F_MQ));
  EXPECT_FALSE(c.has_protocol_feature(VHOST_USER_PROTOCOL_F_REPLY_ACK));
  EXPECT_EQ(c.get_queue_num().value_or(0), 4u);
  EXPECT_TRUE(c.set_owner());
  auto cfg = c.get_config(8);
  ASSERT_TRUE(cfg) << cfg.error().message();
  EXPECT_EQ(*cfg, (std::vector<uint8_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(c.get_max_mem_slots().value_or(0), 32u);
  VhostUserMemoryRegion regions[2] = {{0, 1 << 20, 0x7000'0000, 0}, {1 << 30, 1 << 20, 0, 0}};
  int fds[2] = {efd.get(), efd.get()};
  EXPECT_TRUE(c.set_mem_table(regions, fds));
  EXPECT_TRUE(c.add_mem_reg({0, 4096, 0, 0}, efd.get()));
  auto inflight = c.get_inflight_fd(2, 128);
  ASSERT_TRUE(inflight) << inflight.error().message();
  EXPECT_TRUE(inflight->fd.valid());
  EXPECT_TRUE(c.set_inflight_fd(inflight->info, inflight->fd.get()));
  EXPECT_TRUE(c.set_vring_num(1, 256));
  EXPECT_TRUE(c.set_vring_addr({1, 0, 0x1000, 0x2000, 0x3000, 0}));
  EXPECT_TRUE(c.set_vring_base(1, 5));
  EXPECT_TRUE(c.set_vring_kick(1, efd.get()));
  EXPECT_TRUE(c.set_vring_call(1, -1));
  EXPECT_TRUE(c.set_vring_enable(1, true));
  EXPECT_EQ(c.get_vring_base(1).value_or(0), 99u);
  EXPECT_TRUE(c.reset_device());
}

TEST(FrontendClient, WithReplyAckEveryRequestWithoutItsOwnReplyIsAcked) {
  auto p = testing::make_channel_pair();
  UniqueFd efd(::eventfd(0, EFD_CLOEXEC));
  const uint64_t negotiated = protocol_feature(VHOST_USER_PROTOCOL_F_REPLY_ACK) |
                              protocol_feature(VHOST_USER_PROTOCOL_F_RESET_DEVICE);
  FakeBackend fake(std::move(p.b), [](Channel& ch) {
    expect_request(ch, VHOST_USER_SET_PROTOCOL_FEATURES, false);  // never acked
    for (uint32_t r : {VHOST_USER_SET_FEATURES, VHOST_USER_SET_OWNER, VHOST_USER_SET_MEM_TABLE,
                       VHOST_USER_ADD_MEM_REG, VHOST_USER_SET_INFLIGHT_FD,
                       VHOST_USER_SET_VRING_NUM, VHOST_USER_SET_VRING_ADDR,
                       VHOST_USER_SET_VRING_BASE, VHOST_USER_SET_VRING_KICK,
                       VHOST_USER_SET_VRING_CALL, VHOST_USER_SET_VRING_ENABLE,
                       VHOST_USER_RESET_DEVICE}) {
      expect_request(ch, r, true);
      reply(ch, r, uint64_t{0});
    }
    expect_request(ch, VHOST_USER_GET_FEATURES, false);  // has its own reply: no NEED_REPLY
    reply(ch, VHOST_USER_GET_FEATURES, uint64_t{1});
  });
  FrontendClient c(std::move(p.a), "/run/x.sock");
  ASSERT_TRUE(c.set_protocol_features(negotiated));
  EXPECT_TRUE(c.set_features(1)) << msg(c.set_features(1));
  EXPECT_TRUE(c.set_owner());
  VhostUserMemoryRegion region{0, 4096, 0, 0};
  int fd = efd.get();
  EXPECT_TRUE(c.set_mem_table({&region, 1}, {&fd, 1}));
  EXPECT_TRUE(c.add_mem_reg(region, fd));
  EXPECT_TRUE(c.set_inflight_fd({4096, 0, 1, 128}, fd));
  EXPECT_TRUE(c.set_vring_num(0, 128));
  EXPECT_TRUE(c.set_vring_addr({}));
  EXPECT_TRUE(c.set_vring_base(0, 0));
  EXPECT_TRUE(c.set_vring_kick(0, fd));
  EXPECT_TRUE(c.set_vring_call(0, fd));
  EXPECT_TRUE(c.set_vring_enable(0, false));
  EXPECT_TRUE(c.reset_device());
  EXPECT_EQ(c.get_features().value_or(0), 1u);
}

/// A client with REPLY_ACK negotiated whose back-end answers SET_OWNER with `answer`.
std::string set_owner_error(std::function<void(Channel&)> answer,
                            std::chrono::milliseconds timeout = kReplyTimeout) {
  auto p = testing::make_channel_pair();
  FakeBackend fake(std::move(p.b), [&answer](Channel& ch) {
    expect_request(ch, VHOST_USER_SET_PROTOCOL_FEATURES, false);
    expect_request(ch, VHOST_USER_SET_OWNER, true);
    answer(ch);
  });
  FrontendClient c(std::move(p.a), "/run/x.sock", timeout);
  EXPECT_TRUE(c.set_protocol_features(protocol_feature(VHOST_USER_PROTOCOL_F_REPLY_ACK)));
  auto r = c.set_owner();
  std::string e = msg(r);
  // After a failed exchange the client sends nothing more.
  auto again = c.set_owner();
  EXPECT_NE(msg(again).find("unusable"), std::string::npos) << msg(again);
  return e;
}

TEST(FrontendClient, ANonZeroAckFailsTheRequest) {
  EXPECT_EQ(set_owner_error([](Channel& ch) { reply(ch, VHOST_USER_SET_OWNER, uint64_t{1}); }),
            "vhost-user /run/x.sock: SET_OWNER reply: the back-end failed the request (status 1)");
}

TEST(FrontendClient, AWrongRequestCodeInTheReply) {
  EXPECT_EQ(set_owner_error([](Channel& ch) { reply(ch, VHOST_USER_SET_FEATURES, uint64_t{0}); }),
            "vhost-user /run/x.sock: SET_OWNER reply: reply to SET_FEATURES");
}

TEST(FrontendClient, AReplyWithoutTheReplyFlag) {
  EXPECT_EQ(set_owner_error([](Channel& ch) {
              EXPECT_TRUE(ch.send(make_request(VHOST_USER_SET_OWNER, uint64_t{0})));
            }),
            "vhost-user /run/x.sock: SET_OWNER reply: REPLY flag not set");
}

TEST(FrontendClient, AReplyOfTheWrongSize) {
  EXPECT_EQ(set_owner_error([](Channel& ch) { reply(ch, VHOST_USER_SET_OWNER, uint32_t{0}); }),
            "vhost-user /run/x.sock: SET_OWNER reply: size 4, expected 8");
}

TEST(FrontendClient, ABackEndThatNeverAnswers) {
  EXPECT_EQ(set_owner_error([](Channel& ch) { until_closed(ch); }, 200ms),
            "vhost-user /run/x.sock: SET_OWNER: no reply in 200 ms");
}

TEST(FrontendClient, ABackEndThatClosesMidRequest) {
  std::string e = set_owner_error([](Channel& ch) { ch = Channel(UniqueFd()); });
  EXPECT_EQ(e, "vhost-user /run/x.sock: SET_OWNER: peer closed the connection");
}

TEST(FrontendClient, ATimeoutOnARequestWithItsOwnReply) {
  auto p = testing::make_channel_pair();
  FakeBackend fake(std::move(p.b), [](Channel& ch) {
    expect_request(ch, VHOST_USER_GET_CONFIG, false);
    until_closed(ch);
  });
  FrontendClient c(std::move(p.a), "/run/x.sock", 50ms);
  EXPECT_EQ(msg(c.get_config(60)), "vhost-user /run/x.sock: GET_CONFIG: no reply in 50 ms");
}

TEST(FrontendClient, RefusesBadArgumentsBeforeSending) {
  auto p = testing::make_channel_pair();
  FrontendClient c(std::move(p.a), "/run/x.sock");
  EXPECT_NE(msg(c.get_config(257)).find("at most 256"), std::string::npos);
  VhostUserMemoryRegion regions[9] = {};
  int fds[9] = {};
  EXPECT_NE(msg(c.set_mem_table(regions, fds)).find("SET_MEM_TABLE"), std::string::npos);
  EXPECT_FALSE(c.set_mem_table({regions, 2}, {fds, 1}));
  EXPECT_FALSE(c.set_vring_kick(256, -1));
  // Nothing was sent: the other end sees no message.
  auto none = p.b.recv(0ms);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().errnum, ETIMEDOUT);
}

TEST(FrontendClient, ConnectNamesTheSocket) {
  auto c = FrontendClient::connect("/nonexistent/blk.sock");
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message().find("/nonexistent/blk.sock"), std::string::npos);
}

}  // namespace
}  // namespace tern::vhost_user
