// parse_request(): every request tern's back-end handles, and the malformed variants it refuses.
#include <gtest/gtest.h>
#include <sys/eventfd.h>

#include <cstring>

#include "vhost_user/vhost_user_message.h"

namespace tern::vhost_user {
namespace {

Message with_fds(Message m, size_t n) {
  for (size_t i = 0; i < n; ++i) m.fds.emplace_back(::eventfd(0, EFD_CLOEXEC));
  return m;
}

template <class T>
Message req(uint32_t request, const T& body, size_t fds = 0, bool need_reply = false) {
  return with_fds(make_request(request, body, need_reply), fds);
}

Message empty_req(uint32_t request, size_t fds = 0) {
  return with_fds(make_request(request, std::span<const uint8_t>{}), fds);
}

std::string error_of(Message m) {
  auto r = parse_request(std::move(m));
  return r ? "" : r.error().message();
}

TEST(VhostUserRequest, NoBodyRequests) {
  for (uint32_t code : {VHOST_USER_GET_FEATURES, VHOST_USER_SET_OWNER, VHOST_USER_RESET_OWNER,
                        VHOST_USER_GET_PROTOCOL_FEATURES, VHOST_USER_GET_QUEUE_NUM,
                        VHOST_USER_GET_MAX_MEM_SLOTS, VHOST_USER_RESET_DEVICE,
                        VHOST_USER_GET_STATUS}) {
    auto r = parse_request(empty_req(code));
    ASSERT_TRUE(r) << request_name(code) << ": " << r.error().message();
    EXPECT_EQ(r->request, code);
    EXPECT_TRUE(std::holds_alternative<NoBody>(r->body));
    EXPECT_FALSE(r->need_reply);
    EXPECT_NE(error_of(req(code, uint64_t{0})), "");
    EXPECT_NE(error_of(empty_req(code, 1)), "");
  }
  EXPECT_EQ(error_of(req(VHOST_USER_GET_FEATURES, uint64_t{0})),
            "vhost-user GET_FEATURES: size 8, expected 0");
}

TEST(VhostUserRequest, U64Requests) {
  for (uint32_t code : {VHOST_USER_SET_FEATURES, VHOST_USER_SET_PROTOCOL_FEATURES,
                        VHOST_USER_SET_STATUS}) {
    auto r = parse_request(req(code, uint64_t{0x0f}, 0, true));
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_TRUE(r->need_reply);
    EXPECT_EQ(std::get<uint64_t>(r->body), 0x0fu);
    EXPECT_NE(error_of(req(code, uint32_t{0})), "");
  }
  EXPECT_EQ(error_of(req(VHOST_USER_SET_STATUS, uint64_t{0x100})),
            "vhost-user SET_STATUS: status 256 does not fit a byte");
}

TEST(VhostUserRequest, RefusesABadHeader) {
  Message m = req(VHOST_USER_SET_FEATURES, uint64_t{1});
  m.hdr.flags = 0;
  EXPECT_EQ(error_of(std::move(m)), "vhost-user SET_FEATURES: version 0, expected 1");
  m = req(VHOST_USER_SET_FEATURES, uint64_t{1});
  m.hdr.flags |= VHOST_USER_REPLY_MASK;
  EXPECT_EQ(error_of(std::move(m)), "vhost-user SET_FEATURES: REPLY flag set on a request");
  m = req(VHOST_USER_SET_FEATURES, uint64_t{1});
  m.hdr.size = 4;
  EXPECT_NE(error_of(std::move(m)).find("header size 4"), std::string::npos);
  EXPECT_EQ(error_of(empty_req(99)), "vhost-user request 99: unknown request");
}

TEST(VhostUserRequest, UnsupportedRequestsAreRefusedAndTheirFdsClosed) {
  for (uint32_t code : {VHOST_USER_SET_LOG_BASE, VHOST_USER_SET_LOG_FD, VHOST_USER_SEND_RARP,
                        VHOST_USER_NET_SET_MTU, VHOST_USER_SET_BACKEND_REQ_FD,
                        VHOST_USER_IOTLB_MSG, VHOST_USER_SET_VRING_ENDIAN})
    EXPECT_NE(error_of(req(code, uint64_t{0}, 1)).find("not supported"), std::string::npos);
  // The fd the refused message carried is closed: the peer's other end of a pipe sees EOF.
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  UniqueFd r(p[0]);
  Message m = req(VHOST_USER_SET_LOG_FD, uint64_t{0});
  m.fds.emplace_back(p[1]);
  EXPECT_FALSE(parse_request(std::move(m)));
  char c;
  EXPECT_EQ(::read(r.get(), &c, 1), 0);
}

Message mem_table(uint32_t declared, std::vector<VhostUserMemoryRegion> regions, size_t fds) {
  std::vector<uint8_t> body(8 + regions.size() * sizeof(VhostUserMemoryRegion));
  std::memcpy(body.data(), &declared, 4);
  if (!regions.empty())
    std::memcpy(body.data() + 8, regions.data(), regions.size() * sizeof regions[0]);
  return with_fds(make_request(VHOST_USER_SET_MEM_TABLE, body), fds);
}

TEST(VhostUserRequest, SetMemTable) {
  std::vector<VhostUserMemoryRegion> two = {{0, 1 << 20, 0x7000'0000, 0},
                                            {1 << 30, 1 << 20, 0x8000'0000, 4096}};
  auto r = parse_request(mem_table(2, two, 2));
  ASSERT_TRUE(r) << r.error().message();
  const auto& t = std::get<MemTable>(r->body);
  ASSERT_EQ(t.regions.size(), 2u);
  EXPECT_EQ(t.regions[1].mmap_offset, 4096u);
  EXPECT_EQ(r->fds.size(), 2u);

  std::vector<VhostUserMemoryRegion> eight;
  for (uint64_t i = 0; i < 8; ++i) eight.push_back({i << 20, 1 << 20, (i + 16) << 20, 0});
  EXPECT_TRUE(parse_request(mem_table(8, eight, 8)));
  EXPECT_EQ(error_of(mem_table(9, eight, 8)),
            "vhost-user SET_MEM_TABLE: nregions 9, expected 1 to 8");
  EXPECT_EQ(error_of(mem_table(0, {}, 0)), "vhost-user SET_MEM_TABLE: nregions 0, expected 1 to 8");
  EXPECT_EQ(error_of(mem_table(2, two, 1)), "vhost-user SET_MEM_TABLE: 1 fds, expected 2");
  EXPECT_EQ(error_of(mem_table(3, two, 3)), "vhost-user SET_MEM_TABLE: size 72, expected 104");

  auto bad = [&](VhostUserMemoryRegion reg) { return error_of(mem_table(1, {reg}, 1)); };
  EXPECT_EQ(bad({0, 0, 0, 0}), "vhost-user SET_MEM_TABLE: region 0: memory_size 0");
  EXPECT_NE(bad({~uint64_t{0}, 2, 0, 0}).find("guest_phys_addr + memory_size overflows"),
            std::string::npos);
  EXPECT_NE(bad({0, 2, ~uint64_t{0}, 0}).find("userspace_addr + memory_size overflows"),
            std::string::npos);
  EXPECT_NE(bad({0, 2, 0, ~uint64_t{0}}).find("mmap_offset + memory_size overflows"),
            std::string::npos);
  EXPECT_NE(bad({0, 2, 0, uint64_t{INT64_MAX}}).find("mmap_offset"), std::string::npos);

  std::vector<VhostUserMemoryRegion> overlap = {{0, 1 << 20, 0, 0}, {4096, 1 << 20, 1 << 30, 0}};
  EXPECT_NE(error_of(mem_table(2, overlap, 2)).find("overlap in guest-physical"),
            std::string::npos);
  overlap = {{0, 1 << 20, 0, 0}, {1 << 30, 1 << 20, 4096, 0}};
  EXPECT_NE(error_of(mem_table(2, overlap, 2)).find("overlap in userspace"), std::string::npos);
}

TEST(VhostUserRequest, AddAndRemoveMemReg) {
  VhostUserMemRegMsg reg{0, {1 << 30, 1 << 20, 0x7000'0000, 0}};
  auto add = parse_request(req(VHOST_USER_ADD_MEM_REG, reg, 1));
  ASSERT_TRUE(add) << add.error().message();
  EXPECT_EQ(std::get<VhostUserMemRegMsg>(add->body).region.guest_phys_addr, 1u << 30);
  EXPECT_EQ(add->fds.size(), 1u);
  EXPECT_EQ(error_of(req(VHOST_USER_ADD_MEM_REG, reg, 0)),
            "vhost-user ADD_MEM_REG: 0 fds, expected 1");
  EXPECT_EQ(error_of(req(VHOST_USER_ADD_MEM_REG, VhostUserMemRegMsg{0, {0, 0, 0, 0}}, 1)),
            "vhost-user ADD_MEM_REG: memory_size 0");
  // REM_MEM_REG: no fd (spec), or one (older QEMU), which is closed rather than returned.
  auto rem = parse_request(req(VHOST_USER_REM_MEM_REG, reg, 0));
  ASSERT_TRUE(rem) << rem.error().message();
  rem = parse_request(req(VHOST_USER_REM_MEM_REG, reg, 1));
  ASSERT_TRUE(rem) << rem.error().message();
  EXPECT_TRUE(rem->fds.empty());
  EXPECT_EQ(error_of(req(VHOST_USER_REM_MEM_REG, reg, 2)),
            "vhost-user REM_MEM_REG: 2 fds, expected 0 to 1");
}

TEST(VhostUserRequest, VringState) {
  auto r = parse_request(req(VHOST_USER_SET_VRING_NUM, VhostVringState{1, 256}));
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(std::get<VhostVringState>(r->body).num, 256u);
  EXPECT_EQ(error_of(req(VHOST_USER_SET_VRING_NUM, VhostVringState{1, 0})),
            "vhost-user SET_VRING_NUM: vring 1: num 0, expected 1 to 32768");
  EXPECT_NE(error_of(req(VHOST_USER_SET_VRING_NUM, VhostVringState{1, 65536})), "");
  EXPECT_TRUE(parse_request(req(VHOST_USER_SET_VRING_BASE, VhostVringState{0, 0xffff})));
  EXPECT_EQ(error_of(req(VHOST_USER_SET_VRING_BASE, VhostVringState{0, 0x10000})),
            "vhost-user SET_VRING_BASE: vring 0: base 65536 does not fit 16 bits");
  EXPECT_TRUE(parse_request(req(VHOST_USER_GET_VRING_BASE, VhostVringState{3, 0})));
  EXPECT_TRUE(parse_request(req(VHOST_USER_SET_VRING_ENABLE, VhostVringState{0, 1})));
  EXPECT_EQ(error_of(req(VHOST_USER_SET_VRING_ENABLE, VhostVringState{0, 2})),
            "vhost-user SET_VRING_ENABLE: vring 0: enable 2, expected 0 or 1");
  EXPECT_EQ(error_of(req(VHOST_USER_GET_VRING_BASE, uint32_t{0})),
            "vhost-user GET_VRING_BASE: size 4, expected 8");
}

TEST(VhostUserRequest, VringAddr) {
  auto r = parse_request(req(VHOST_USER_SET_VRING_ADDR, VhostVringAddr{0, 0, 1, 2, 3, 0}));
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(std::get<VhostVringAddr>(r->body).avail_user_addr, 3u);
  EXPECT_NE(error_of(req(VHOST_USER_SET_VRING_ADDR, VhostVringAddr{0, 2, 1, 2, 3, 0}))
                .find("unknown flags"),
            std::string::npos);
}

TEST(VhostUserRequest, VringKickCallErr) {
  for (uint32_t code : {VHOST_USER_SET_VRING_KICK, VHOST_USER_SET_VRING_CALL,
                        VHOST_USER_SET_VRING_ERR}) {
    auto r = parse_request(req(code, uint64_t{5}, 1));
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(std::get<VringFd>(r->body).index, 5);
    EXPECT_TRUE(std::get<VringFd>(r->body).has_fd);
    EXPECT_EQ(r->fds.size(), 1u);
    r = parse_request(req(code, uint64_t{5} | VHOST_USER_VRING_NOFD_MASK, 0));
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_FALSE(std::get<VringFd>(r->body).has_fd);
    EXPECT_NE(error_of(req(code, uint64_t{5}, 0)).find("0 fds, expected 1"), std::string::npos);
    EXPECT_NE(error_of(req(code, uint64_t{5} | VHOST_USER_VRING_NOFD_MASK, 1))
                  .find("1 fds, expected 0"),
              std::string::npos);
    EXPECT_NE(error_of(req(code, uint64_t{1} << 9, 0)).find("unknown bits"), std::string::npos);
  }
}

Message config_req(uint32_t code, VhostUserConfigHeader h, size_t data) {
  std::vector<uint8_t> body(sizeof h + data, 0xab);
  std::memcpy(body.data(), &h, sizeof h);
  return make_request(code, body);
}

TEST(VhostUserRequest, Config) {
  auto g = parse_request(config_req(VHOST_USER_GET_CONFIG, {0, 60, 0}, 60));
  ASSERT_TRUE(g) << g.error().message();
  EXPECT_EQ(std::get<ConfigRequest>(g->body).hdr.size, 60u);
  EXPECT_TRUE(std::get<ConfigRequest>(g->body).data.empty());
  auto s = parse_request(config_req(VHOST_USER_SET_CONFIG, {4, 2, 0}, 2));
  ASSERT_TRUE(s) << s.error().message();
  EXPECT_EQ(std::get<ConfigRequest>(s->body).data, (std::vector<uint8_t>{0xab, 0xab}));
  EXPECT_TRUE(parse_request(config_req(VHOST_USER_SET_CONFIG, {0, 256, 1}, 256)));
  EXPECT_EQ(error_of(config_req(VHOST_USER_SET_CONFIG, {0, 257, 0}, 257)),
            "vhost-user SET_CONFIG: config size 257, more than 256");
  EXPECT_EQ(error_of(config_req(VHOST_USER_SET_CONFIG, {UINT32_MAX, 2, 0}, 2)),
            "vhost-user SET_CONFIG: config offset + size overflows");
  EXPECT_EQ(error_of(config_req(VHOST_USER_GET_CONFIG, {0, 60, 0}, 8)),
            "vhost-user GET_CONFIG: size 20, expected 72");
  EXPECT_NE(error_of(config_req(VHOST_USER_SET_CONFIG, {0, 2, 2}, 2)).find("flags"),
            std::string::npos);
  EXPECT_NE(error_of(req(VHOST_USER_GET_CONFIG, uint64_t{0})).find("shorter"), std::string::npos);
}

TEST(VhostUserRequest, Inflight) {
  auto g = parse_request(req(VHOST_USER_GET_INFLIGHT_FD, VhostUserInflight{0, 0, 2, 128}));
  ASSERT_TRUE(g) << g.error().message();
  EXPECT_EQ(std::get<VhostUserInflight>(g->body).num_queues, 2);
  EXPECT_EQ(error_of(req(VHOST_USER_GET_INFLIGHT_FD, VhostUserInflight{0, 0, 0, 128})),
            "vhost-user GET_INFLIGHT_FD: num_queues 0");
  EXPECT_NE(error_of(req(VHOST_USER_GET_INFLIGHT_FD, VhostUserInflight{0, 0, 1, 0})), "");
  const uint64_t need = 2 * inflight_queue_region_bytes(128);
  auto s = parse_request(req(VHOST_USER_SET_INFLIGHT_FD, VhostUserInflight{need, 0, 2, 128}, 1));
  ASSERT_TRUE(s) << s.error().message();
  EXPECT_EQ(s->fds.size(), 1u);
  EXPECT_NE(error_of(req(VHOST_USER_SET_INFLIGHT_FD, VhostUserInflight{need - 1, 0, 2, 128}, 1))
                .find("less than"),
            std::string::npos);
  EXPECT_NE(error_of(req(VHOST_USER_SET_INFLIGHT_FD,
                         VhostUserInflight{need, ~uint64_t{0}, 2, 128}, 1))
                .find("overflows"),
            std::string::npos);
  EXPECT_NE(error_of(req(VHOST_USER_SET_INFLIGHT_FD, VhostUserInflight{need, 0, 2, 128}, 0))
                .find("0 fds"),
            std::string::npos);
}

}  // namespace
}  // namespace tern::vhost_user
