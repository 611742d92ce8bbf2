// The back-end against the ring a front-end picks after reading the config space (issue 31 item
// 8): QEMU's vhost-user-blk-pci reads seg_max (GET_CONFIG) before SET_VRING_NUM, with queue-size
// 128 by default, so seg_max must fit that ring and a request of seg_max segments must be served
// on it; a request the back-end refuses must say so in its status byte.
#include <sys/eventfd.h>

#include <gtest/gtest.h>

#include "vhost_user/backend/blk_backend.h"
#include "vhost_user/backend/blk_backend_testing.h"
#include "vhost_user/backend/blk_session.h"

namespace tern::vhost_user {
namespace {

using namespace testing;
using tern::testing::eventually;
using Buf = tern::testing::FakeVirtqueueDriver::Buf;

constexpr uint16_t kQemuDefaultRing = 128;
constexpr uint64_t kHeader = 0x10000, kStatus = 0x10080, kData = 0x20000;

/// A write of `segs` 512-byte segments at sector 0, the data filled with `fill`.
std::vector<Buf> write_request(BackendRam& ram, uint32_t segs, uint8_t fill) {
  EXPECT_TRUE(ram.mem().write_obj(kHeader, virtio::VirtioBlkOuthdr{virtio::VIRTIO_BLK_T_OUT, 0, 0})
                  .has_value());
  EXPECT_TRUE(ram.mem().write_obj(kStatus, uint8_t{0xff}).has_value());
  EXPECT_TRUE(ram.mem().write(kData, std::vector<uint8_t>(512ull * segs, fill)).has_value());
  std::vector<Buf> bufs{{kHeader, 16, false}};
  for (uint32_t i = 0; i < segs; ++i) bufs.push_back({kData + 512ull * i, 512, false});
  bufs.push_back({kStatus, 1, true});
  return bufs;
}

TEST(BlkBackendRingTest, SegMaxFitsQemusDefaultRingAndSuchARequestIsServed) {
  ServedRing r(kQemuDefaultRing);
  [[maybe_unused]] auto& [backend, fe, ram, kick_fd, call_fd] = r;
  ASSERT_NO_FATAL_FAILURE(r.negotiate());
  const uint32_t seg_max = fe.config().seg_max;  // read before the ring size is known, as QEMU does
  ASSERT_NO_FATAL_FAILURE(r.start());
  EXPECT_LE(seg_max + 2, kQemuDefaultRing);  // after SET_VRING_NUM 128
  EXPECT_EQ(fe.config().seg_max, seg_max);
  ASSERT_GT(seg_max, 0u);
  ASSERT_LE(512ull * seg_max, kImageBytes);
  ASSERT_LE(seg_max + 2, kQemuDefaultRing) << "a direct chain of seg_max segments cannot fit";

  // seg_max segments in a direct chain (header + data + status fill the ring)...
  ram.driver().add_chain(write_request(ram, seg_max, 0x5a));
  kick(kick_fd.get());
  ASSERT_TRUE(eventually([&] { return ram.driver().used_idx() == 1; }));
  EXPECT_EQ(ram.mem().read_obj<uint8_t>(kStatus).value(), virtio::VIRTIO_BLK_S_OK);
  EXPECT_EQ(backend.read_image(0, 512ull * seg_max), std::vector<uint8_t>(512ull * seg_max, 0x5a));
  // ... and in an indirect table, as Linux's virtio-blk builds it.
  ram.driver().add_indirect(0x60000, write_request(ram, seg_max, 0xa5));
  kick(kick_fd.get());
  ASSERT_TRUE(eventually([&] { return ram.driver().used_idx() == 2; }));
  EXPECT_EQ(ram.mem().read_obj<uint8_t>(kStatus).value(), virtio::VIRTIO_BLK_S_OK);
  EXPECT_EQ(backend.read_image(0, 512ull * seg_max), std::vector<uint8_t>(512ull * seg_max, 0xa5));
}

TEST(BlkBackendRingTest, SegMaxFollowsASmallerQueueSize) {
  EXPECT_EQ(backend_seg_max(256), 126u);
  EXPECT_EQ(backend_seg_max(128), 126u);
  EXPECT_EQ(backend_seg_max(64), 62u);
  EXPECT_EQ(backend_seg_max(2), 0u);
}

// A chain the walker refuses (a data buffer outside the memory table) is answered
// VIRTIO_BLK_S_IOERR in its status byte: a guest reading the stale byte must not see a success.
TEST(BlkBackendRingTest, ARefusedRequestIsAnsweredIoerrInItsStatusByte) {
  ServedRing r;
  [[maybe_unused]] auto& [backend, fe, ram, kick_fd, call_fd] = r;
  ASSERT_NO_FATAL_FAILURE(r.negotiate());
  ASSERT_NO_FATAL_FAILURE(r.start());
  auto before = backend.read_image(0, 512);
  auto bufs = write_request(ram, 1, 0x33);
  bufs[1].gpa = kRamBytes + 0x1000;  // not in the memory table
  ASSERT_TRUE(ram.mem().write_obj(kStatus, uint8_t{virtio::VIRTIO_BLK_S_OK}).has_value());
  ram.driver().add_chain(bufs);
  kick(kick_fd.get());
  ASSERT_TRUE(eventually([&] { return ram.driver().used_idx() == 1; }));
  EXPECT_EQ(ram.mem().read_obj<uint8_t>(kStatus).value(), virtio::VIRTIO_BLK_S_IOERR);
  EXPECT_EQ(ram.driver().used_elem(0).len, 1u);
  EXPECT_EQ(backend.read_image(0, 512), before);
  // The ring keeps serving.
  ram.driver().add_chain(write_request(ram, 1, 0x44));
  kick(kick_fd.get());
  ASSERT_TRUE(eventually([&] { return ram.driver().used_idx() == 2; }));
  EXPECT_EQ(ram.mem().read_obj<uint8_t>(kStatus).value(), virtio::VIRTIO_BLK_S_OK);
  EXPECT_EQ(backend.read_image(0, 512), std::vector<uint8_t>(512, 0x44));
}

}  // namespace
}  // namespace tern::vhost_user
