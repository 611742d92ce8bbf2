#include "vhost_user/backend/blk_backend.h"

#include <sys/eventfd.h>

#include <gtest/gtest.h>

#include "vhost_user/backend/blk_backend_testing.h"
#include "vhost_user/frontend_client.h"
#include "vhost_user/testing/channel_pair.h"

namespace tern::vhost_user {
namespace {

using namespace testing;
using tern::testing::eventually;
using virtio::VIRTIO_BLK_T_IN;
using virtio::VIRTIO_BLK_T_OUT;

UniqueFd eventfd0() { return UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)); }

TEST(BlkBackendTest, NegotiatesAndServesAReadAndAWrite) {
  BackendThread backend;
  MiniFrontend fe(backend.connect());
  ASSERT_NO_FATAL_FAILURE(fe.negotiate());
  auto q = parse_u64_reply(fe.call(VHOST_USER_GET_QUEUE_NUM).value(), VHOST_USER_GET_QUEUE_NUM);
  EXPECT_EQ(q.value(), 1u);
  auto slots = parse_u64_reply(fe.call(VHOST_USER_GET_MAX_MEM_SLOTS).value(),
                               VHOST_USER_GET_MAX_MEM_SLOTS);
  EXPECT_EQ(slots.value(), 32u);
  VhostUserConfigHeader ch{0, sizeof(virtio::VirtioBlkConfig), 0};
  auto cfg = parse_config_reply(fe.call(VHOST_USER_GET_CONFIG, [&] {
                                    std::vector<uint8_t> b(sizeof ch + ch.size);
                                    std::memcpy(b.data(), &ch, sizeof ch);
                                    return b;
                                  }()).value(),
                                ch.size);
  ASSERT_TRUE(cfg.has_value()) << cfg.error().message();
  virtio::VirtioBlkConfig c;
  std::memcpy(&c, cfg->data(), sizeof c);
  EXPECT_EQ(c.capacity, kImageBytes / 512);

  SharedRam ram;
  UniqueFd kick_fd = eventfd0(), call_fd = eventfd0();
  ASSERT_NO_FATAL_FAILURE(fe.start_ring(ram, 0, kick_fd.get(), call_fd.get()));

  // A write of sector 2, then a read of sector 0, through the ring in the shared memfd.
  std::memset(ram.data(0x10000), 0xab, 512);
  ram.add_request(VIRTIO_BLK_T_OUT, 2, 0x10000, 512);
  kick(kick_fd.get());
  ASSERT_TRUE(eventually([&] { return ram.driver().used_idx() == 1; }));
  EXPECT_EQ(ram.status(0x10000), virtio::VIRTIO_BLK_S_OK);
  EXPECT_EQ(backend.read_image(1024, 512), std::vector<uint8_t>(512, 0xab));
  ram.add_request(VIRTIO_BLK_T_IN, 0, 0x20000, 512);
  kick(kick_fd.get());
  ASSERT_TRUE(eventually([&] { return ram.driver().used_idx() == 2; }));
  EXPECT_EQ(ram.status(0x20000), virtio::VIRTIO_BLK_S_OK);
  auto want = backend.read_image(0, 512);
  EXPECT_EQ(std::memcmp(ram.data(0x20000), want.data(), 512), 0);
  EXPECT_EQ(ram.driver().used_elem(1).len, 513u);  // data + status
  uint64_t calls = 0;
  EXPECT_EQ(::read(call_fd.get(), &calls, sizeof calls), 8);  // the call eventfd was written

  // GET_VRING_BASE stops the ring and reports where it stopped.
  auto base = parse_vring_base_reply(
      fe.call(VHOST_USER_GET_VRING_BASE, VhostVringState{0, 0}).value(), 0);
  EXPECT_EQ(base.value(), 2u);
}

// A new memory table while the ring runs: the ring is stopped (drained), remapped and restarted
// where it was.
TEST(BlkBackendTest, ANewMemoryTableRestartsTheRunningRing) {
  BackendThread backend;
  MiniFrontend fe(backend.connect());
  ASSERT_NO_FATAL_FAILURE(fe.negotiate());
  SharedRam ram;
  UniqueFd kick_fd = eventfd0(), call_fd = eventfd0();
  ASSERT_NO_FATAL_FAILURE(fe.start_ring(ram, 0, kick_fd.get(), call_fd.get()));
  ram.add_request(VIRTIO_BLK_T_IN, 0, 0x10000, 512);
  kick(kick_fd.get());
  ASSERT_TRUE(eventually([&] { return ram.driver().used_idx() == 1; }));
  VhostUserMemRegMsg rem{0, ram.region()};
  ASSERT_TRUE(fe.acked(VHOST_USER_REM_MEM_REG, rem, {ram.fd()}).has_value());
  ASSERT_TRUE(fe.acked(VHOST_USER_ADD_MEM_REG, rem, {ram.fd()}).has_value());
  ram.add_request(VIRTIO_BLK_T_IN, 1, 0x20000, 512);
  kick(kick_fd.get());
  ASSERT_TRUE(eventually([&] { return ram.driver().used_idx() == 2; }));
  auto base = parse_vring_base_reply(
      fe.call(VHOST_USER_GET_VRING_BASE, VhostVringState{0, 0}).value(), 0);
  EXPECT_EQ(base.value(), 2u);
}

TEST(BlkBackendTest, AcceptsTheNextFrontEndAfterADisconnect) {
  BackendThread backend;
  SharedRam ram;
  UniqueFd kick_fd = eventfd0(), call_fd = eventfd0();
  {
    MiniFrontend fe(backend.connect());
    ASSERT_NO_FATAL_FAILURE(fe.negotiate());
    ASSERT_NO_FATAL_FAILURE(fe.start_ring(ram, 0, kick_fd.get(), call_fd.get()));
    ram.add_request(VIRTIO_BLK_T_IN, 0, 0x10000, 512);
    kick(kick_fd.get());
    ASSERT_TRUE(eventually([&] { return ram.driver().used_idx() == 1; }));
  }  // disconnected while the ring runs: the back-end stops it and accepts again
  MiniFrontend fe(backend.connect());
  ASSERT_NO_FATAL_FAILURE(fe.negotiate());
  ASSERT_NO_FATAL_FAILURE(fe.start_ring(ram, 1, kick_fd.get(), call_fd.get()));
  std::memset(ram.data(0x20000), 0x5a, 512);
  ram.add_request(VIRTIO_BLK_T_OUT, 4, 0x20000, 512);
  kick(kick_fd.get());
  ASSERT_TRUE(eventually([&] { return ram.driver().used_idx() == 2; }));
  EXPECT_EQ(backend.read_image(4 * 512, 512), std::vector<uint8_t>(512, 0x5a));
}

TEST(BlkBackendTest, AMalformedMessageDropsTheConnectionOnly) {
  BackendThread backend;
  {
    MiniFrontend fe(backend.connect());
    // SET_VRING_NUM takes 8 bytes; 4 is malformed.
    ASSERT_TRUE(fe.channel().send(make_request(VHOST_USER_SET_VRING_NUM, uint32_t{0})).has_value());
    auto r = fe.channel().recv(std::chrono::seconds(10));
    ASSERT_FALSE(r.has_value());
    EXPECT_NE(r.error().message().find("closed"), std::string::npos) << r.error().message();
  }
  MiniFrontend fe(backend.connect());
  ASSERT_NO_FATAL_FAILURE(fe.negotiate());
}

TEST(BlkBackendTest, UnsupportedRequestsFailTheirAckAndTheConnectionLives) {
  BackendThread backend;
  MiniFrontend fe(backend.connect());
  ASSERT_NO_FATAL_FAILURE(fe.negotiate());
  EXPECT_FALSE(fe.acked(VHOST_USER_SET_LOG_BASE, uint64_t{0}).has_value());
  EXPECT_FALSE(fe.acked(VHOST_USER_SET_VRING_NUM, VhostVringState{5, 16}).has_value());  // no queue 5
  EXPECT_FALSE(fe.acked(VHOST_USER_SET_VRING_NUM, VhostVringState{0, 3}).has_value());   // not 2^n
  auto q = parse_u64_reply(fe.call(VHOST_USER_GET_QUEUE_NUM).value(), VHOST_USER_GET_QUEUE_NUM);
  EXPECT_EQ(q.value(), 1u);
}

TEST(BlkBackendTest, RingAddressesOutsideTheMemoryTableAreRefused) {
  BackendThread backend;
  MiniFrontend fe(backend.connect());
  ASSERT_NO_FATAL_FAILURE(fe.negotiate());
  SharedRam ram;
  UniqueFd kick_fd = eventfd0(), call_fd = eventfd0();
  ASSERT_NO_FATAL_FAILURE(fe.start_ring(ram, 0, kick_fd.get(), call_fd.get()));
  ASSERT_TRUE(parse_vring_base_reply(
                  fe.call(VHOST_USER_GET_VRING_BASE, VhostVringState{0, 0}).value(), 0)
                  .has_value());
  VhostVringAddr a = ram.addr();
  a.used_user_addr = kUserBase + kRamBytes + 4096;
  EXPECT_FALSE(fe.acked(VHOST_USER_SET_VRING_ADDR, a).has_value());
}

TEST(BlkBackendTest, ResubmitsInflightRequestsOfAPreviousBackend) {
  BackendThread backend;
  MiniFrontend fe(backend.connect());
  ASSERT_NO_FATAL_FAILURE(fe.negotiate());
  auto inflight = parse_inflight_reply(
      fe.call(VHOST_USER_GET_INFLIGHT_FD, VhostUserInflight{0, 0, 1, kRingSize}).value(), 1 << 20);
  ASSERT_TRUE(inflight.has_value()) << inflight.error().message();
  size_t len = inflight->info.mmap_size;
  auto* region = static_cast<uint8_t*>(::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED,
                                              inflight->fd.get(), 0));
  ASSERT_NE(region, MAP_FAILED);
  auto* qhdr = reinterpret_cast<QueueRegionSplit*>(region);
  auto* desc = reinterpret_cast<DescStateSplit*>(region + sizeof(QueueRegionSplit));
  EXPECT_EQ(qhdr->version, 1);
  EXPECT_EQ(qhdr->desc_num, kRingSize);

  // A previous back-end took two writes (avail idx 2) and died before completing them; the
  // front-end, which saw no used entry, restarts the ring at base 2 with the kept region.
  SharedRam ram;
  std::memset(ram.data(0x10000), 0x11, 512);
  std::memset(ram.data(0x20000), 0x22, 512);
  uint16_t h1 = ram.add_request(VIRTIO_BLK_T_OUT, 8, 0x10000, 512);
  uint16_t h2 = ram.add_request(VIRTIO_BLK_T_OUT, 9, 0x20000, 512);
  desc[h2] = DescStateSplit{1, {}, 0, 41};
  desc[h1] = DescStateSplit{1, {}, 0, 40};
  ASSERT_TRUE(fe.acked(VHOST_USER_SET_INFLIGHT_FD, inflight->info, {inflight->fd.get()}).has_value());
  UniqueFd kick_fd = eventfd0(), call_fd = eventfd0();
  ASSERT_NO_FATAL_FAILURE(fe.start_ring(ram, 2, kick_fd.get(), call_fd.get()));
  ASSERT_TRUE(eventually([&] { return ram.driver().used_idx() == 2; }));
  EXPECT_EQ(ram.driver().used_elem(0).id, h1);  // in counter order
  EXPECT_EQ(ram.driver().used_elem(1).id, h2);
  EXPECT_EQ(backend.read_image(8 * 512, 512), std::vector<uint8_t>(512, 0x11));
  EXPECT_EQ(backend.read_image(9 * 512, 512), std::vector<uint8_t>(512, 0x22));
  ASSERT_TRUE(eventually([&] { return qhdr->used_idx == 2; }));
  EXPECT_EQ(desc[h1].inflight, 0);
  EXPECT_EQ(desc[h2].inflight, 0);

  // New requests are tracked: marked while served, cleared once published.
  ram.add_request(VIRTIO_BLK_T_IN, 0, 0x30000, 512);
  kick(kick_fd.get());
  ASSERT_TRUE(eventually([&] { return ram.driver().used_idx() == 3 && qhdr->used_idx == 3; }));
  for (uint16_t i = 0; i < kRingSize; ++i) EXPECT_EQ(desc[i].inflight, 0) << i;
  EXPECT_GT(desc[ram.driver().used_elem(2).id].counter, 41u);
  ::munmap(region, len);
}

// The command itself, confined by its seccomp filter, in a child process: negotiation, memory
// mapping, queue threads, io_uring, a reconnect, and a clean stop on SIGTERM that removes the
// socket all work with only the allowed system calls.
TEST(BlkBackendTest, ServesUnderItsSeccompFilterAndStopsOnSigterm) {
  BackendThread backend(/*confined=*/true);
  SharedRam ram;
  UniqueFd kick_fd = eventfd0(), call_fd = eventfd0();
  {
    MiniFrontend fe(backend.connect());
    ASSERT_NO_FATAL_FAILURE(fe.negotiate());
    auto inflight = fe.call(VHOST_USER_GET_INFLIGHT_FD, VhostUserInflight{0, 0, 1, kRingSize});
    ASSERT_TRUE(parse_inflight_reply(std::move(inflight.value()), 1 << 20).has_value());
    ASSERT_NO_FATAL_FAILURE(fe.start_ring(ram, 0, kick_fd.get(), call_fd.get()));
    std::memset(ram.data(0x10000), 0x77, 512);
    ram.add_request(VIRTIO_BLK_T_OUT, 3, 0x10000, 512);
    kick(kick_fd.get());
    ASSERT_TRUE(eventually([&] { return ram.driver().used_idx() == 1; }));
    EXPECT_EQ(ram.status(0x10000), virtio::VIRTIO_BLK_S_OK);
    EXPECT_EQ(backend.read_image(3 * 512, 512), std::vector<uint8_t>(512, 0x77));
  }
  MiniFrontend fe(backend.connect());
  ASSERT_NO_FATAL_FAILURE(fe.negotiate());
  ASSERT_NO_FATAL_FAILURE(fe.start_ring(ram, 1, kick_fd.get(), call_fd.get()));
  ram.add_request(VIRTIO_BLK_T_IN, 3, 0x20000, 512);
  kick(kick_fd.get());
  ASSERT_TRUE(eventually([&] { return ram.driver().used_idx() == 2; }));
  EXPECT_EQ(std::memcmp(ram.data(0x20000), std::vector<uint8_t>(512, 0x77).data(), 512), 0);
  EXPECT_EQ(backend.stop_child(), 0);
  EXPECT_NE(::access(backend.socket().c_str(), F_OK), 0);  // removed at exit
}

TEST(BlkBackendTest, BadOptionsAreRefusedNamingTheField) {
  std::atomic<bool> stop{true};
  BlkBackendOptions o;
  o.disk.path = "/nonexistent/disk.img";
  auto r = run_blk_backend(o, stop);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("--socket"), std::string::npos) << r.error().message();
  o.socket = "/tmp/tern-vub-never.sock";
  r = run_blk_backend(o, stop);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("/nonexistent/disk.img"), std::string::npos)
      << r.error().message();
}

}  // namespace
}  // namespace tern::vhost_user

namespace tern::vhost_user {
namespace {

using namespace testing;

// tern's own front-end client against tern's back-end: the handshake tern run will do.
TEST(BlkBackendInteropTest, FrontendClientNegotiatesEverythingTernOffers) {
  BackendThread backend;
  (void)backend.connect().fd();  // wait for the socket (that connection is dropped at once)
  auto fe = FrontendClient::connect(backend.socket());
  ASSERT_TRUE(fe.has_value()) << fe.error().message();
  auto f = fe->get_features();
  ASSERT_TRUE(f.has_value()) << f.error().message();
  ASSERT_TRUE(fe->set_features(*f).has_value());
  auto p = fe->get_protocol_features();
  ASSERT_TRUE(p.has_value());
  ASSERT_TRUE(fe->set_protocol_features(*p & kTernProtocolFeatures).has_value());
  EXPECT_TRUE(fe->has_protocol_feature(VHOST_USER_PROTOCOL_F_REPLY_ACK));
  ASSERT_TRUE(fe->set_owner().has_value());
  EXPECT_EQ(fe->get_queue_num().value(), 1u);
  EXPECT_EQ(fe->get_max_mem_slots().value(), 32u);
  auto cfg = fe->get_config(sizeof(virtio::VirtioBlkConfig));
  ASSERT_TRUE(cfg.has_value()) << cfg.error().message();
  SharedRam ram;
  VhostUserMemoryRegion r = ram.region();
  int fd = ram.fd();
  ASSERT_TRUE(fe->set_mem_table(std::span(&r, 1), std::span(&fd, 1)).has_value());
  auto inflight = fe->get_inflight_fd(1, kRingSize);
  ASSERT_TRUE(inflight.has_value()) << inflight.error().message();
  ASSERT_TRUE(fe->set_inflight_fd(inflight->info, inflight->fd.get()).has_value());
  UniqueFd kick_fd(::eventfd(0, EFD_CLOEXEC)), call_fd(::eventfd(0, EFD_CLOEXEC));
  ASSERT_TRUE(fe->set_vring_num(0, kRingSize).has_value());
  ASSERT_TRUE(fe->set_vring_addr(ram.addr()).has_value());
  ASSERT_TRUE(fe->set_vring_base(0, 0).has_value());
  ASSERT_TRUE(fe->set_vring_call(0, call_fd.get()).has_value());
  ASSERT_TRUE(fe->set_vring_kick(0, kick_fd.get()).has_value());
  ASSERT_TRUE(fe->set_vring_enable(0, true).has_value());
  ram.add_request(virtio::VIRTIO_BLK_T_IN, 0, 0x10000, 512);
  kick(kick_fd.get());
  ASSERT_TRUE(tern::testing::eventually([&] { return ram.driver().used_idx() == 1; }));
  EXPECT_EQ(fe->get_vring_base(0).value(), 1u);
  EXPECT_FALSE(fe->set_vring_num(7, kRingSize).has_value());  // a failure ack names the request
}

}  // namespace
}  // namespace tern::vhost_user
