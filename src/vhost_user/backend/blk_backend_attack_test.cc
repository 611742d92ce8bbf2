// A hostile front-end against tern's back-end: each test is one thing a peer could do.
#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <sys/mman.h>

#include <gtest/gtest.h>

#include "vhost_user/backend/blk_backend.h"
#include "vhost_user/backend/blk_backend_testing.h"
#include "vhost_user/frontend_client.h"

namespace tern::vhost_user {
namespace {

using namespace testing;
using tern::testing::eventually;
using virtio::VIRTIO_BLK_T_IN;

UniqueFd eventfd0() { return UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)); }

// A second GET_INFLIGHT_FD while the ring runs used to unmap the region the queue worker writes
// its inflight flags into (use-after-unmap: SIGSEGV in the back-end). Now the ring is stopped,
// moved to the new region and restarted.
TEST(BlkBackendAttackTest, ANewInflightRegionWhileTheRingRunsIsSafe) {
  BackendThread backend;
  MiniFrontend fe(backend.connect());
  ASSERT_NO_FATAL_FAILURE(fe.negotiate());
  auto first = parse_inflight_reply(
      fe.call(VHOST_USER_GET_INFLIGHT_FD, VhostUserInflight{0, 0, 1, kRingSize}).value(), 1 << 20);
  ASSERT_TRUE(first.has_value()) << first.error().message();
  BackendRam ram;
  UniqueFd kick_fd = eventfd0(), call_fd = eventfd0();
  ASSERT_NO_FATAL_FAILURE(fe.start_ring(ram, 0, kick_fd.get(), call_fd.get()));
  ram.add_request(VIRTIO_BLK_T_IN, 0, 0x10000, 512);
  kick(kick_fd.get());
  ASSERT_TRUE(eventually([&] { return ram.driver().used_idx() == 1; }));

  auto second = parse_inflight_reply(
      fe.call(VHOST_USER_GET_INFLIGHT_FD, VhostUserInflight{0, 0, 1, kRingSize}).value(), 1 << 20);
  ASSERT_TRUE(second.has_value()) << second.error().message();
  // Not mapped here: the test's own mapping could take the freed address and hide the bug.
  ram.add_request(VIRTIO_BLK_T_IN, 1, 0x20000, 512);
  kick(kick_fd.get());
  ASSERT_TRUE(eventually([&] { return ram.driver().used_idx() == 2; }));
  auto base = parse_vring_base_reply(
      fe.call(VHOST_USER_GET_VRING_BASE, VhostVringState{0, 0}).value(), 0);
  EXPECT_EQ(base.value(), 2u);
}

// A call fd that is a pipe whose reader is closed: signalling it used to raise SIGPIPE and kill
// the whole back-end process.
TEST(BlkBackendAttackTest, ACallPipeWithoutReaderDoesNotKillTheBackend) {
  BackendThread backend;
  MiniFrontend fe(backend.connect());
  ASSERT_NO_FATAL_FAILURE(fe.negotiate());
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
  UniqueFd reader(p[0]), writer(p[1]);
  reader.reset();
  BackendRam ram;
  UniqueFd kick_fd = eventfd0();
  ASSERT_NO_FATAL_FAILURE(fe.start_ring(ram, 0, kick_fd.get(), writer.get()));
  ram.add_request(VIRTIO_BLK_T_IN, 0, 0x10000, 512);
  kick(kick_fd.get());
  ASSERT_TRUE(eventually([&] { return ram.driver().used_idx() == 1; }));
  ram.add_request(VIRTIO_BLK_T_IN, 1, 0x20000, 512);
  kick(kick_fd.get());
  ASSERT_TRUE(eventually([&] { return ram.driver().used_idx() == 2; }));
}

// A call fd that is a full pipe in blocking mode: the queue thread's signal used to block
// forever, and with it every later request and the stop that GET_VRING_BASE needs.
TEST(BlkBackendAttackTest, AFullBlockingCallPipeDoesNotStopTheQueue) {
  BackendThread backend;
  MiniFrontend fe(backend.connect());
  ASSERT_NO_FATAL_FAILURE(fe.negotiate());
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
  UniqueFd reader(p[0]), writer(p[1]);
  char junk[4096] = {};
  while (::write(writer.get(), junk, sizeof junk) > 0) {
  }
  ASSERT_EQ(::fcntl(writer.get(), F_SETFL, 0), 0);  // blocking again, and full
  BackendRam ram;
  UniqueFd kick_fd = eventfd0();
  ASSERT_NO_FATAL_FAILURE(fe.start_ring(ram, 0, kick_fd.get(), writer.get()));
  ram.add_request(VIRTIO_BLK_T_IN, 0, 0x10000, 512);
  kick(kick_fd.get());
  ASSERT_TRUE(eventually([&] { return ram.driver().used_idx() == 1; }));
  ram.add_request(VIRTIO_BLK_T_IN, 1, 0x20000, 512);
  kick(kick_fd.get());
  ASSERT_TRUE(eventually([&] { return ram.driver().used_idx() == 2; }));
  auto base = parse_vring_base_reply(
      fe.call(VHOST_USER_GET_VRING_BASE, VhostVringState{0, 0}).value(), 0);
  EXPECT_EQ(base.value(), 2u);
}

}  // namespace
}  // namespace tern::vhost_user
