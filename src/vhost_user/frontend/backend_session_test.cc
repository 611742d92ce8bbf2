// BackendSession through VhostUserBlk: pause/resume positions, the back-end going away and
// coming back (counters, replay with base = used->idx and the kept inflight fd, one kick), a
// GET_VRING_BASE answer outside the ring refused, a back-end that came back with fewer features
// (NEEDS_RESET), and call relaying vs irqfds.
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sstream>

#include "base/testing/eventually.h"
#include "vhost_user/frontend/testing/vu_blk_fixture.h"

namespace tern::vhost_user {
namespace {

using tern::testing::eventually;
using testing::Received;
using testing::SharedRam;

ino_t inode(int fd) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 ? st.st_ino : 0;
}

// The fd of the first `request` on `connection` (-1 if none), under the fake's lock.
int fd_of(testing::FakeBackend& b, uint32_t request, int connection) {
  for (const Received& r : b.log())
    if (r.msg.hdr.request == request && r.connection == connection && !r.msg.fds.empty())
      return r.msg.fds[0].get();
  return -1;
}

std::vector<uint32_t> nums(testing::FakeBackend& b, uint32_t request, int connection) {
  std::vector<uint32_t> out;
  for (const Received& r : b.log())
    if (r.msg.hdr.request == request && r.connection == connection)
      out.push_back(r.body<VhostVringState>().num);
  return out;
}

class SessionTest : public VuBlkTest {
 protected:
  void SetUp() override {
    be.start();
    auto d = create(1);
    ASSERT_TRUE(d) << d.error().message();
    dev = std::move(*d);
  }
  void activate_one() {
    ASSERT_TRUE(activate(*dev, ram, 1, dev->device_features(), irq));
    ASSERT_TRUE(be.wait_for(VHOST_USER_SET_VRING_ENABLE, 1, 1));
  }

  SharedRam ram;
  std::shared_ptr<virtio::testing::SignalCountingInterrupt> irq =
      std::make_shared<virtio::testing::SignalCountingInterrupt>();
  std::shared_ptr<VhostUserBlk> dev;
};

TEST_F(SessionTest, PauseReturnsTheBackendsBaseAndTheUsedIdxAndResumeRestartsFromThem) {
  activate_one();
  be.locked([](auto& b) { b.vring_base = 7; });
  ram.set_used_idx(SharedRam::queue(0), 5);
  dev->quiesce();
  EXPECT_EQ(dev->queue_positions(), (std::vector<QueuePosition>{{7, 5}}));
  EXPECT_EQ(be.requests(1).back(), VHOST_USER_GET_VRING_BASE);
  dev->unquiesce();
  ASSERT_TRUE(be.wait_for(VHOST_USER_SET_VRING_ENABLE, 2, 1));
  be.locked([](auto& b) {
    EXPECT_EQ(nums(b, VHOST_USER_SET_VRING_BASE, 1), (std::vector<uint32_t>{0, 7}));
  });
  EXPECT_EQ(irq->needs_reset(), 0u);
}

// A GET_VRING_BASE answer past the available ring's idx (a buggy or hostile back-end) is not a
// position the ring can be in: refused (a protocol error, the connection dropped), both positions
// are the used ring's idx, and the reconnect starts the vring there.
TEST_F(SessionTest, GetVringBaseOutsideTheRingsWindowIsRefusedAndTheUsedIdxIsTheirPosition) {
  activate_one();
  be.locked([](auto& b) { b.vring_base = 9; });
  ram.set_used_idx(SharedRam::queue(0), 5);
  ASSERT_TRUE(
      ram.mem().write_obj<uint16_t>(SharedRam::queue(0).avail_gpa + virtio::avail_idx_offset(), 7));
  dev->quiesce();
  EXPECT_EQ(dev->queue_positions(), (std::vector<QueuePosition>{{5, 5}}));
  EXPECT_EQ(counter(*dev, "backend_protocol_errors"), 1u);
  EXPECT_EQ(counter(*dev, "backend_disconnects"), 1u);
  dev->unquiesce();
  ASSERT_TRUE(be.wait_for(VHOST_USER_SET_VRING_ENABLE, 1, 2));
  be.locked([](auto& b) {
    EXPECT_EQ(nums(b, VHOST_USER_SET_VRING_BASE, 2), (std::vector<uint32_t>{5}));
  });
  EXPECT_EQ(irq->needs_reset(), 0u);
}

// The connection dropped at a later vring's refused answer: the vrings stopped before it on that
// connection get the used ring's idx too (their answers came from the same back-end, whose
// successor would never resubmit what they claim to have taken), as a reconnect while paused
// does — a snapshot saved before the reconnect must not hold the dropped back-end's word.
TEST_F(SessionTest, ARefusedAnswerMakesEveryVringOfThatPauseStartFromTheUsedIdx) {
  dev.reset();  // the fake serves one connection at a time: this device's is number 2
  auto d = create(2);
  ASSERT_TRUE(d) << d.error().message();
  dev = std::move(*d);
  ASSERT_TRUE(activate(*dev, ram, 2, dev->device_features(), irq));
  ASSERT_TRUE(be.wait_for(VHOST_USER_SET_VRING_ENABLE, 2, 2));
  be.locked([](auto& b) { b.vring_base = 7; });
  for (uint16_t q = 0; q < 2; ++q) {
    ram.set_used_idx(SharedRam::queue(q), 5);
    ASSERT_TRUE(ram.mem().write_obj<uint16_t>(
        SharedRam::queue(q).avail_gpa + virtio::avail_idx_offset(), q == 0 ? 7 : 6));
  }
  ASSERT_EQ(::unlink(sock.c_str()), 0);  // no reconnect (which would reset the positions)
  dev->quiesce();
  EXPECT_EQ(counter(*dev, "backend_protocol_errors"), 1u);  // vring 1's 7 is past avail 6
  EXPECT_EQ(dev->queue_positions(), (std::vector<QueuePosition>{{5, 5}, {5, 5}}));
}

// A back-end that takes every reconnect and hangs up again (a crash loop, or one that dislikes
// what it is sent) is reconnected every reconnect_min for ever: each "reconnected" line is
// within the session's log rate limit (3 a minute), as the matching "lost" warnings are, so the
// loop cannot flood the log.
TEST_F(SessionTest, AFlappingBackendsReconnectsAreLoggedWithinTheRateLimit) {
  std::ostringstream log;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(log);
  sink->set_pattern("%v");
  auto& sinks = spdlog::default_logger()->sinks();
  sinks.push_back(sink);
  activate_one();
  constexpr int kFlaps = 8;
  for (int c = 1; c <= kFlaps; ++c) {
    be.hang_up();
    ASSERT_TRUE(be.wait_for(VHOST_USER_SET_VRING_ENABLE, 1, c + 1));
    ASSERT_TRUE(eventually([&] { return counter(*dev, "backend_reconnects") == uint64_t(c); }));
  }
  dev.reset();  // joins the monitor: nothing logs while the sink goes
  sinks.pop_back();
  const std::string text = log.str();
  size_t lines = 0;
  for (size_t at = text.find("reconnected"); at != std::string::npos;
       at = text.find("reconnected", at + 1))
    ++lines;
  EXPECT_LE(lines, 3u) << text;
}

TEST_F(SessionTest, BackendKilledIsCountedAndTheReconnectReplaysFromTheUsedIdxWithTheInflightFd) {
  activate_one();
  const ino_t inflight = be.inflight_inode();
  ASSERT_NE(inflight, 0u);
  ino_t kick = be.locked([](auto& b) { return inode(fd_of(b, VHOST_USER_SET_VRING_KICK, 1)); });
  ram.set_used_idx(SharedRam::queue(0), 3);
  be.hang_up();
  ASSERT_TRUE(be.wait_for(VHOST_USER_SET_VRING_ENABLE, 1, 2));
  ASSERT_TRUE(eventually([&] { return counter(*dev, "backend_reconnects") == 1; }));
  EXPECT_EQ(counter(*dev, "backend_connected"), 1u);
  EXPECT_EQ(counter(*dev, "backend_disconnects"), 1u);
  EXPECT_EQ(counter(*dev, "backend_protocol_errors"), 0u);
  be.locked([&](auto& b) {
    EXPECT_EQ(nums(b, VHOST_USER_SET_VRING_BASE, 2), (std::vector<uint32_t>{3}));
    EXPECT_EQ(testing::FakeBackend::count(b.log(), VHOST_USER_GET_INFLIGHT_FD, 2), 0u);
    EXPECT_EQ(inode(fd_of(b, VHOST_USER_SET_INFLIGHT_FD, 2)), inflight);
    int k = fd_of(b, VHOST_USER_SET_VRING_KICK, 2);
    EXPECT_EQ(inode(k), kick);
    uint64_t n = 0;  // the kick after the replay reached the eventfd the back-end watches
    EXPECT_EQ(::read(k, &n, sizeof n), static_cast<ssize_t>(sizeof n));
    EXPECT_GE(n, 1u);
  });
  std::vector<uint32_t> r2 = be.requests(2);
  ASSERT_GE(r2.size(), 6u);
  EXPECT_EQ(r2[0], VHOST_USER_GET_FEATURES);
  EXPECT_EQ(irq->needs_reset(), 0u);
}

TEST_F(SessionTest, BackendAwayAtPauseGivesTheUsedIdxForBothPositions) {
  activate_one();
  ram.set_used_idx(SharedRam::queue(0), 9);
  be.stop();  // gone for good: no reconnect can succeed
  ASSERT_TRUE(eventually([&] { return counter(*dev, "backend_connected") == 0; }));
  dev->quiesce();
  EXPECT_EQ(dev->queue_positions(), (std::vector<QueuePosition>{{9, 9}}));
  dev->unquiesce();
  EXPECT_EQ(irq->needs_reset(), 0u);
  ASSERT_TRUE(eventually([&] { return counter(*dev, "backend_reconnect_attempts") >= 2; }));
}

TEST_F(SessionTest, BackendBackWithoutAnAckedFeatureMakesTheDeviceNeedReset) {
  activate_one();
  be.locked([](auto& b) { b.features &= ~virtio::feature(virtio::VIRTIO_F_EVENT_IDX); });
  be.hang_up();
  ASSERT_TRUE(eventually([&] { return irq->needs_reset() == 1; }));
  EXPECT_EQ(counter(*dev, "backend_needs_reset"), 1u);
  EXPECT_EQ(be.requests(2).back(), VHOST_USER_SET_OWNER);  // handshake, no replay
}

TEST_F(SessionTest, CallsWithoutAnIrqfdAreRelayedAndCounted) {
  activate_one();
  be.locked([](auto& b) {
    uint64_t one = 1;
    ASSERT_EQ(::write(fd_of(b, VHOST_USER_SET_VRING_CALL, 1), &one, sizeof one), 8);
  });
  EXPECT_GE(irq->wait_more(0, 0), 1u);
  ASSERT_TRUE(eventually([&] { return counter(*dev, "relayed_calls") >= 1; }));
}

TEST_F(SessionTest, QueueWithAnIrqfdHandsTheIrqfdToTheBackend) {
  UniqueFd irqfd = make_eventfd(0, EFD_NONBLOCK).value();
  irq->set_irqfd(0, irqfd.borrow());
  activate_one();
  be.locked([&](auto& b) {
    EXPECT_EQ(inode(fd_of(b, VHOST_USER_SET_VRING_CALL, 1)), inode(irqfd.get()));
  });
}

// A device reset discards the GET_VRING_BASE answer (the next activation starts from the new
// rings), so it is not checked against the ring: a driver that reset its device after writing
// its avail idx below what the back-end took (the guest owns the avail ring) must not get a
// well-behaved back-end counted as a protocol error and its connection dropped.
TEST_F(SessionTest, DeviceResetDoesNotJudgeTheBackendByTheDriversAvailIdx) {
  activate_one();
  be.locked([](auto& b) { b.vring_base = 7; });  // took 5 and 6, not completed yet
  ram.set_used_idx(SharedRam::queue(0), 5);
  ASSERT_TRUE(
      ram.mem().write_obj<uint16_t>(SharedRam::queue(0).avail_gpa + virtio::avail_idx_offset(), 5));
  dev->reset();
  ASSERT_TRUE(be.wait_for(VHOST_USER_GET_VRING_BASE, 1, 1));
  EXPECT_EQ(counter(*dev, "backend_protocol_errors"), 0u);
  EXPECT_EQ(counter(*dev, "backend_disconnects"), 0u);
  activate_one();  // on the same connection
  EXPECT_EQ(counter(*dev, "backend_reconnect_attempts"), 0u);
}

TEST_F(SessionTest, DeviceResetStopsTheVringsAndTheNextActivationGetsAFreshInflightRegion) {
  activate_one();
  dev->reset();
  ASSERT_TRUE(be.wait_for(VHOST_USER_GET_VRING_BASE, 1, 1));
  activate_one();
  ASSERT_TRUE(be.wait_for(VHOST_USER_SET_VRING_ENABLE, 2, 1));
  be.locked([](auto& b) {
    EXPECT_EQ(testing::FakeBackend::count(b.log(), VHOST_USER_GET_INFLIGHT_FD, 1), 2u);
  });
}

}  // namespace
}  // namespace tern::vhost_user
