#include "vhost_user/vhost_user_message.h"

#include <gtest/gtest.h>
#include <sys/eventfd.h>

#include <cstring>

namespace tern::vhost_user {
namespace {

template <class T>
Message reply_of(uint32_t request, const T& body) {
  return make_reply(request, {reinterpret_cast<const uint8_t*>(&body), sizeof body});
}

std::string error_of(const Result<void>& r) { return r ? "" : r.error().message(); }
template <class T>
std::string error_of(const Result<T>& r) {
  return r ? "" : r.error().message();
}

TEST(VhostUserReply, U64) {
  auto v = parse_u64_reply(reply_of(VHOST_USER_GET_QUEUE_NUM, uint64_t{4}),
                           VHOST_USER_GET_QUEUE_NUM);
  ASSERT_TRUE(v) << v.error().message();
  EXPECT_EQ(*v, 4u);
}

TEST(VhostUserReply, RefusesAWrongHeader) {
  Message m = reply_of(VHOST_USER_GET_FEATURES, uint64_t{1});
  m.hdr.flags = VHOST_USER_VERSION;  // no REPLY
  EXPECT_EQ(error_of(parse_u64_reply(m, VHOST_USER_GET_FEATURES)),
            "vhost-user GET_FEATURES reply: REPLY flag not set");
  m = reply_of(VHOST_USER_GET_FEATURES, uint64_t{1});
  m.hdr.flags = 2 | VHOST_USER_REPLY_MASK;
  EXPECT_EQ(error_of(parse_u64_reply(m, VHOST_USER_GET_FEATURES)),
            "vhost-user GET_FEATURES reply: version 2, expected 1");
  m = reply_of(VHOST_USER_GET_PROTOCOL_FEATURES, uint64_t{1});
  EXPECT_EQ(error_of(parse_u64_reply(m, VHOST_USER_GET_FEATURES)),
            "vhost-user GET_FEATURES reply: reply to GET_PROTOCOL_FEATURES");
  m = reply_of(VHOST_USER_GET_FEATURES, uint32_t{1});
  EXPECT_EQ(error_of(parse_u64_reply(m, VHOST_USER_GET_FEATURES)),
            "vhost-user GET_FEATURES reply: size 4, expected 8");
  m = reply_of(VHOST_USER_GET_FEATURES, uint64_t{1});
  m.hdr.size = 16;  // header and payload disagree (a hand-built Message)
  EXPECT_NE(error_of(parse_u64_reply(m, VHOST_USER_GET_FEATURES)).find("header size 16"),
            std::string::npos);
  m = reply_of(VHOST_USER_GET_FEATURES, uint64_t{1});
  m.fds.emplace_back(::eventfd(0, EFD_CLOEXEC));
  EXPECT_EQ(error_of(parse_u64_reply(m, VHOST_USER_GET_FEATURES)),
            "vhost-user GET_FEATURES reply: 1 fds, expected 0");
}

TEST(VhostUserReply, Ack) {
  EXPECT_TRUE(parse_ack_reply(reply_of(VHOST_USER_SET_MEM_TABLE, uint64_t{0}),
                              VHOST_USER_SET_MEM_TABLE));
  EXPECT_EQ(error_of(parse_ack_reply(reply_of(VHOST_USER_SET_MEM_TABLE, uint64_t{1}),
                                     VHOST_USER_SET_MEM_TABLE)),
            "vhost-user SET_MEM_TABLE reply: the back-end failed the request (status 1)");
}

TEST(VhostUserReply, VringBase) {
  auto v = parse_vring_base_reply(reply_of(VHOST_USER_GET_VRING_BASE, VhostVringState{1, 77}), 1);
  ASSERT_TRUE(v) << v.error().message();
  EXPECT_EQ(*v, 77u);
  EXPECT_EQ(error_of(parse_vring_base_reply(
                reply_of(VHOST_USER_GET_VRING_BASE, VhostVringState{2, 77}), 1)),
            "vhost-user GET_VRING_BASE reply: vring 2, expected 1");
}

struct ConfigBody {
  VhostUserConfigHeader h;
  uint8_t data[8];
};

TEST(VhostUserReply, Config) {
  ConfigBody b{{0, 8, 0}, {1, 2, 3, 4, 5, 6, 7, 8}};
  auto v = parse_config_reply(reply_of(VHOST_USER_GET_CONFIG, b), 8);
  ASSERT_TRUE(v) << v.error().message();
  EXPECT_EQ(*v, (std::vector<uint8_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(error_of(parse_config_reply(reply_of(VHOST_USER_GET_CONFIG, b), 4)),
            "vhost-user GET_CONFIG reply: size 20, expected 16");
  b.h.offset = 0x100;
  EXPECT_EQ(error_of(parse_config_reply(reply_of(VHOST_USER_GET_CONFIG, b), 8)),
            "vhost-user GET_CONFIG reply: offset 256, expected 0");
  b.h = {0, 4, 0};
  EXPECT_EQ(error_of(parse_config_reply(reply_of(VHOST_USER_GET_CONFIG, b), 8)),
            "vhost-user GET_CONFIG reply: config size 4, expected 8");
  EXPECT_FALSE(parse_config_reply(reply_of(VHOST_USER_GET_CONFIG, b), 1000));
}

TEST(VhostUserReply, Inflight) {
  Message m = reply_of(VHOST_USER_GET_INFLIGHT_FD, VhostUserInflight{4096, 0, 1, 128});
  m.fds.emplace_back(::eventfd(0, EFD_CLOEXEC));
  int raw = m.fds[0].get();
  auto r = parse_inflight_reply(std::move(m), 8192);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->info.mmap_size, 4096u);
  EXPECT_EQ(r->fd.get(), raw);

  auto with_fd = [](VhostUserInflight i) {
    Message m = reply_of(VHOST_USER_GET_INFLIGHT_FD, i);
    m.fds.emplace_back(::eventfd(0, EFD_CLOEXEC));
    return m;
  };
  EXPECT_EQ(error_of(parse_inflight_reply(with_fd({0, 0, 1, 128}), 8192)),
            "vhost-user GET_INFLIGHT_FD reply: mmap_size 0");
  EXPECT_NE(error_of(parse_inflight_reply(with_fd({1 << 20, 0, 1, 128}), 8192))
                .find("more than the 8192 bytes"),
            std::string::npos);
  EXPECT_NE(error_of(parse_inflight_reply(with_fd({4096, 100, 1, 128}), 8192))
                .find("not page-aligned"),
            std::string::npos);
  EXPECT_NE(error_of(parse_inflight_reply(with_fd({4096, ~uint64_t{4095}, 1, 128}), 8192))
                .find("overflows"),
            std::string::npos);
  EXPECT_EQ(error_of(parse_inflight_reply(
                reply_of(VHOST_USER_GET_INFLIGHT_FD, VhostUserInflight{4096, 0, 1, 128}), 8192)),
            "vhost-user GET_INFLIGHT_FD reply: 0 fds, expected 1");
}

TEST(VhostUserRequestBuild, SetsVersionAndNeedReply) {
  Message m = make_request(VHOST_USER_SET_VRING_NUM, VhostVringState{0, 128}, true);
  EXPECT_EQ(m.hdr.flags, VHOST_USER_VERSION | VHOST_USER_NEED_REPLY_MASK);
  EXPECT_EQ(m.hdr.size, 8u);
  EXPECT_EQ(m.payload.size(), 8u);
  m = make_request(VHOST_USER_SET_OWNER, std::span<const uint8_t>{});
  EXPECT_EQ(m.hdr.flags, VHOST_USER_VERSION);
  EXPECT_EQ(m.hdr.size, 0u);
}

}  // namespace
}  // namespace tern::vhost_user
