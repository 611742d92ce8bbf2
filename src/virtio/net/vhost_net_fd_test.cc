// The tern → vhost translations (memory table, ring addresses, features) and the errors of
// VhostNetFd::open / vhost_net_available(), without /dev/vhost-net.
#include "virtio/net/vhost_net_fd.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>

#include "virtio/net/net_header.h"
#include "virtio/net/vhost_net_queues.h"
#include "virtio/testing/fake_virtqueue_driver.h"
#include "virtio/virtio_spec.h"

namespace tern::net {
namespace {

using testing::FakeGuestRam;
using virtio::feature;

constexpr uint64_t kRing = feature(virtio::VIRTIO_F_VERSION_1) |
                           feature(virtio::VIRTIO_F_EVENT_IDX) |
                           feature(virtio::VIRTIO_F_INDIRECT_DESC) |
                           feature(VIRTIO_NET_F_MRG_RXBUF);

TEST(VhostNetFeatures, MaskIsTheFourRingFeatures) { EXPECT_EQ(vhost_net_ring_feature_mask(), kRing); }

TEST(VhostNetFeatures, OnlyAckedRingFeaturesGoToVhost) {
  // What drivers/vhost/net.c offers (VHOST_NET_FEATURES) includes bits tern never sets.
  constexpr uint64_t kOffered = kRing | feature(24) /* NOTIFY_ON_EMPTY */ |
                                feature(26) /* VHOST_F_LOG_ALL */ |
                                feature(27) /* VHOST_NET_F_VIRTIO_NET_HDR */ |
                                feature(33) /* ACCESS_PLATFORM */;
  uint64_t acked = feature(virtio::VIRTIO_F_VERSION_1) | feature(VIRTIO_NET_F_MRG_RXBUF) |
                   feature(VIRTIO_NET_F_CSUM) | feature(VIRTIO_NET_F_MAC) |
                   feature(VIRTIO_NET_F_CTRL_VQ) | feature(VIRTIO_NET_F_MQ) |
                   feature(VIRTIO_NET_F_GUEST_TSO4) | feature(27);
  auto f = vhost_net_features_to_set(acked, kOffered);
  ASSERT_TRUE(f) << f.error().message();
  EXPECT_EQ(*f, feature(virtio::VIRTIO_F_VERSION_1) | feature(VIRTIO_NET_F_MRG_RXBUF));
  auto all = vhost_net_features_to_set(~uint64_t{0}, kOffered);
  ASSERT_TRUE(all);
  EXPECT_EQ(*all, kRing);
}

TEST(VhostNetFeatures, AckedRingFeatureVhostLacksIsRefused) {
  uint64_t offered = kRing & ~feature(virtio::VIRTIO_F_EVENT_IDX);
  auto f = vhost_net_features_to_set(kRing, offered);
  ASSERT_FALSE(f);
  EXPECT_NE(f.error().message().find("0x20000000"), std::string::npos) << f.error().message();
}

TEST(VhostNetFeatures, VersionOneIsRequired) {
  auto f = vhost_net_features_to_set(feature(VIRTIO_NET_F_MRG_RXBUF), kRing);
  ASSERT_FALSE(f);
  EXPECT_NE(f.error().message().find("VIRTIO_F_VERSION_1"), std::string::npos);
}

TEST(VhostNetMemoryTable, EveryRegionWithItsHostAddress) {
  FakeGuestRam ram;
  auto t = vhost_memory_table(ram.mem());
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0], (VhostMemoryRegion{0, FakeGuestRam::kLowSize, reinterpret_cast<uintptr_t>(ram.at(0))}));
  EXPECT_EQ(t[1], (VhostMemoryRegion{FakeGuestRam::kHighGpa, FakeGuestRam::kHighSize,
                                     reinterpret_cast<uintptr_t>(ram.at(FakeGuestRam::kHighGpa))}));
}

VirtqueueConfig queue(uint16_t size, uint64_t desc, uint64_t avail, uint64_t used) {
  VirtqueueConfig q;
  q.size = size;
  q.desc_gpa = desc;
  q.avail_gpa = avail;
  q.used_gpa = used;
  q.enabled = true;
  return q;
}

TEST(VhostNetVringAddr, RingsTranslateToHostVirtual) {
  FakeGuestRam ram;
  // The used ring in the high region: each ring is translated on its own.
  constexpr uint64_t kUsed = FakeGuestRam::kHighGpa + 0x1000;
  auto a = vring_host_addresses(ram.mem(), queue(256, 0x4000, 0x5000, kUsed));
  ASSERT_TRUE(a) << a.error().message();
  EXPECT_EQ(a->desc_user_addr, reinterpret_cast<uintptr_t>(ram.at(0x4000)));
  EXPECT_EQ(a->avail_user_addr, reinterpret_cast<uintptr_t>(ram.at(0x5000)));
  EXPECT_EQ(a->used_user_addr, reinterpret_cast<uintptr_t>(ram.at(kUsed)));
}

TEST(VhostNetVringAddr, RingsOutsideRamAreRefusedByName) {
  FakeGuestRam ram;
  constexpr uint64_t kHole = FakeGuestRam::kHoleStart;
  struct Case {
    VirtqueueConfig q;
    const char* ring;
  } cases[] = {
      {queue(256, kHole, 0x5000, 0x6000), "descriptor table"},
      // Starts in RAM, ends in the hole: 16 * 256 bytes from 4 KiB below the hole's start + 16.
      {queue(256, kHole - 4096 + 16, 0x5000, 0x6000), "descriptor table"},
      {queue(256, 0x4000, kHole - 2, 0x6000), "available ring"},
      {queue(256, 0x4000, 0x5000, FakeGuestRam::kHighGpa + FakeGuestRam::kHighSize - 8),
       "used ring"},
      {queue(256, 0x4000, 0x5000, ~uint64_t{0} - 3), "used ring"},  // wraps around
  };
  for (const Case& c : cases) {
    auto a = vring_host_addresses(ram.mem(), c.q);
    ASSERT_FALSE(a) << c.ring;
    EXPECT_NE(a.error().message().find(c.ring), std::string::npos) << a.error().message();
    EXPECT_NE(a.error().message().find("not in guest RAM"), std::string::npos)
        << a.error().message();
  }
}

TEST(VhostNetVringAddr, MisalignedRingsAndBadSizesAreRefused) {
  FakeGuestRam ram;
  EXPECT_FALSE(vring_host_addresses(ram.mem(), queue(256, 0x4008, 0x5000, 0x6000)));
  EXPECT_FALSE(vring_host_addresses(ram.mem(), queue(256, 0x4000, 0x5001, 0x6000)));
  EXPECT_FALSE(vring_host_addresses(ram.mem(), queue(256, 0x4000, 0x5000, 0x6002)));
  EXPECT_FALSE(vring_host_addresses(ram.mem(), queue(0, 0x4000, 0x5000, 0x6000)));
  EXPECT_FALSE(vring_host_addresses(ram.mem(), queue(100, 0x4000, 0x5000, 0x6000)));
  EXPECT_TRUE(vring_host_addresses(ram.mem(), queue(1, 0x4000, 0x5002, 0x6004)));
}

TEST(VhostNetFd, OpenErrorNamesTheDeviceAndPath) {
  auto fd = VhostNetFd::open("virtio-net0", 0, "/nonexistent/vhost-net");
  ASSERT_FALSE(fd);
  EXPECT_EQ(fd.error().errnum, ENOENT);
  EXPECT_EQ(fd.error().message(),
            "virtio-net0: open: /nonexistent/vhost-net: No such file or directory");
}

TEST(VhostNetFd, AvailableSaysWhyNot) {
  if (::access(kVhostNetPath, F_OK) == 0) {
    // A machine with vhost-net: available() is what opening it says; features follow.
    if (vhost_net_available()) {
      EXPECT_EQ(vhost_net_ring_features() & kRing, vhost_net_ring_features());
    }
    GTEST_SKIP() << kVhostNetPath << " exists here";
  }
  auto r = vhost_net_available();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().errnum, ENOENT);
  EXPECT_NE(r.error().message().find("/dev/vhost-net"), std::string::npos);
  EXPECT_EQ(vhost_net_ring_features(), 0u);
}

}  // namespace
}  // namespace tern::net
