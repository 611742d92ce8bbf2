// VhostUserBlk against a scripted back-end on a real Unix socket: create()'s negotiation and its
// failures (refused queue count, a back-end that never answers, garbage), the activation's
// request sequence with its fds, and the memory table's two forms.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstddef>

#include "base/testing/temp_dir.h"
#include "vhost_user/frontend/blk_features.h"
#include "vhost_user/frontend/testing/vu_blk_fixture.h"

namespace tern::vhost_user {
namespace {

using testing::Received;
using testing::SharedRam;

TEST_F(VuBlkTest, CreateMasksFeaturesAndReadsConfigAtOffsetZero) {
  be.features |= virtio::feature(33) | virtio::feature(34) | virtio::feature(35) |
                 virtio::feature(38) | virtio::feature(40) |
                 virtio::feature(virtio::VIRTIO_BLK_F_CONFIG_WCE);
  be.protocol_features = ~uint64_t{0};
  be.start();
  auto dev = create(1);
  ASSERT_TRUE(dev) << dev.error().message();
  EXPECT_EQ((*dev)->device_features(), kGuestFeatures);  // no MQ with one queue
  EXPECT_EQ(be.requests(1),
            (std::vector<uint32_t>{VHOST_USER_GET_FEATURES, VHOST_USER_GET_PROTOCOL_FEATURES,
                                   VHOST_USER_SET_PROTOCOL_FEATURES, VHOST_USER_GET_QUEUE_NUM,
                                   VHOST_USER_SET_OWNER, VHOST_USER_GET_CONFIG}));
  be.locked([](auto& b) {
    for (const Received& r : b.log()) {
      if (r.msg.hdr.request == VHOST_USER_SET_PROTOCOL_FEATURES) {
        EXPECT_EQ(r.template body<uint64_t>(), kTernProtocolFeatures);
      }
      if (r.msg.hdr.request == VHOST_USER_GET_CONFIG) {
        auto h = r.template body<VhostUserConfigHeader>();
        EXPECT_EQ(h.offset, 0u);  // not the PCI capability offset (Cloud Hypervisor #7615)
        EXPECT_EQ(h.size, kBlkConfigBytes);
      }
    }
  });
  virtio::VirtioBlkConfig c{};
  (*dev)->read_config(0, std::span<uint8_t>(reinterpret_cast<uint8_t*>(&c), sizeof c));
  EXPECT_EQ(c.capacity, kCapacity);
  EXPECT_EQ(c.num_queues, 1);  // patched from the back-end's 4
  EXPECT_EQ(c.blk_size, 4096u);
}

TEST_F(VuBlkTest, MoreQueuesThanTheBackendServesAreRefusedByName) {
  be.queue_num = 2;
  be.start();
  auto dev = create(4);
  ASSERT_FALSE(dev);
  EXPECT_NE(dev.error().message().find("queues=4"), std::string::npos) << dev.error().message();
  EXPECT_NE(dev.error().message().find("at most 2"), std::string::npos) << dev.error().message();
  EXPECT_NE(dev.error().message().find(sock), std::string::npos) << dev.error().message();
}

TEST_F(VuBlkTest, BackendThatNeverAnswersFailsCreateNamingTheSocket) {
  be.mode = testing::FakeBackend::Mode::kHang;
  be.start();
  opts.reply_timeout = std::chrono::milliseconds(100);
  auto dev = create(1);
  ASSERT_FALSE(dev);
  const std::string m = dev.error().message();
  EXPECT_NE(m.find(sock), std::string::npos) << m;
  EXPECT_NE(m.find("GET_FEATURES"), std::string::npos) << m;
  EXPECT_NE(m.find("100 ms"), std::string::npos) << m;
}

TEST_F(VuBlkTest, GarbageReplyFailsCreateNamingTheRequest) {
  be.mode = testing::FakeBackend::Mode::kGarbage;
  be.start();
  auto dev = create(1);
  ASSERT_FALSE(dev);
  EXPECT_NE(dev.error().message().find("GET_FEATURES"), std::string::npos) << dev.error().message();
}

TEST_F(VuBlkTest, ShortConfigSpaceFailsCreateSayingSo) {
  be.config_reply_size = 24;
  be.start();
  auto dev = create(1);
  ASSERT_FALSE(dev);
  EXPECT_NE(dev.error().message().find("GET_CONFIG"), std::string::npos) << dev.error().message();
}

TEST_F(VuBlkTest, BackendWithoutConfigProtocolFeatureIsRefused) {
  be.protocol_features = kTernProtocolFeatures & ~protocol_feature(VHOST_USER_PROTOCOL_F_CONFIG);
  be.start();
  auto dev = create(1);
  ASSERT_FALSE(dev);
  EXPECT_NE(dev.error().message().find("CONFIG"), std::string::npos) << dev.error().message();
}

ino_t inode(int fd) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 ? st.st_ino : 0;
}

TEST_F(VuBlkTest, ActivationSendsFeaturesMemSlotsInflightAndVringsWithTheirFds) {
  be.start();
  auto dev = create(2);
  ASSERT_TRUE(dev) << dev.error().message();
  EXPECT_EQ((*dev)->device_features(), kGuestFeatures | virtio::feature(virtio::VIRTIO_BLK_F_MQ));
  SharedRam ram;
  auto irq = std::make_shared<virtio::testing::SignalCountingInterrupt>();
  const uint64_t acked = (*dev)->device_features();
  ASSERT_TRUE(activate(**dev, ram, 2, acked, irq));
  ASSERT_TRUE(be.wait_for(VHOST_USER_SET_VRING_ENABLE, 2));
  std::vector<uint32_t> want = {VHOST_USER_SET_FEATURES,    VHOST_USER_GET_MAX_MEM_SLOTS,
                                VHOST_USER_ADD_MEM_REG,     VHOST_USER_ADD_MEM_REG,
                                VHOST_USER_GET_INFLIGHT_FD, VHOST_USER_SET_INFLIGHT_FD};
  for (int q = 0; q < 2; ++q)
    want.insert(want.end(), {VHOST_USER_SET_VRING_NUM, VHOST_USER_SET_VRING_BASE,
                             VHOST_USER_SET_VRING_ADDR, VHOST_USER_SET_VRING_CALL,
                             VHOST_USER_SET_VRING_KICK, VHOST_USER_SET_VRING_ENABLE});
  std::vector<uint32_t> got = be.requests(1);
  ASSERT_GE(got.size(), 6u);
  EXPECT_EQ(std::vector<uint32_t>(got.begin() + 6, got.end()), want);

  be.locked([&](auto& b) {
    int region = 0, vring_addr = 0;
    for (const Received& r : b.log()) {
      switch (r.msg.hdr.request) {
        case VHOST_USER_SET_FEATURES:
          EXPECT_EQ(r.template body<uint64_t>(),
                    acked | (uint64_t{1} << VHOST_USER_F_PROTOCOL_FEATURES));
          break;
        case VHOST_USER_ADD_MEM_REG: {
          auto m = r.template body<VhostUserMemRegMsg>();
          EXPECT_EQ(m.region.guest_phys_addr, region == 0 ? 0 : SharedRam::kHighGpa);
          EXPECT_EQ(m.region.memory_size, SharedRam::kSize);
          EXPECT_EQ(m.region.userspace_addr, reinterpret_cast<uint64_t>(ram.host(region)));
          EXPECT_EQ(m.region.mmap_offset, 0u);
          ASSERT_EQ(r.msg.fds.size(), 1u);
          EXPECT_EQ(inode(r.msg.fds[0].get()), inode(ram.fd(region)));
          ++region;
          break;
        }
        case VHOST_USER_GET_INFLIGHT_FD: {
          auto in = r.template body<VhostUserInflight>();
          EXPECT_EQ(in.num_queues, 2);
          EXPECT_EQ(in.queue_size, 256);
          break;
        }
        case VHOST_USER_SET_INFLIGHT_FD:
          ASSERT_EQ(r.msg.fds.size(), 1u);
          EXPECT_EQ(inode(r.msg.fds[0].get()), b.inflight_inode_locked());
          break;
        case VHOST_USER_SET_VRING_ADDR: {
          auto a = r.template body<VhostVringAddr>();
          VirtqueueConfig q = SharedRam::queue(vring_addr++);
          EXPECT_EQ(a.desc_user_addr, reinterpret_cast<uint64_t>(ram.host(0) + q.desc_gpa));
          EXPECT_EQ(a.avail_user_addr, reinterpret_cast<uint64_t>(ram.host(0) + q.avail_gpa));
          EXPECT_EQ(a.used_user_addr, reinterpret_cast<uint64_t>(ram.host(0) + q.used_gpa));
          break;
        }
        case VHOST_USER_SET_VRING_NUM:
          EXPECT_EQ(r.template body<VhostVringState>().num, 256u);
          break;
        case VHOST_USER_SET_VRING_KICK:
        case VHOST_USER_SET_VRING_CALL:
          EXPECT_EQ(r.msg.fds.size(), 1u);
          EXPECT_EQ(r.template body<uint64_t>() & VHOST_USER_VRING_NOFD_MASK, 0u);
          break;
        case VHOST_USER_SET_VRING_ENABLE:
          EXPECT_EQ(r.template body<VhostVringState>().num, 1u);
          break;
      }
    }
    EXPECT_EQ(region, 2);
  });
  EXPECT_EQ(counter(**dev, "backend_connected"), 1u);
}

TEST_F(VuBlkTest, WithoutMemSlotsTheMemoryTableIsOneSetMemTableWithAnFdPerRegion) {
  be.protocol_features &= ~protocol_feature(VHOST_USER_PROTOCOL_F_CONFIGURE_MEM_SLOTS);
  be.start();
  auto dev = create(1);
  ASSERT_TRUE(dev) << dev.error().message();
  SharedRam ram;
  auto irq = std::make_shared<virtio::testing::SignalCountingInterrupt>();
  ASSERT_TRUE(activate(**dev, ram, 1, (*dev)->device_features(), irq));
  ASSERT_TRUE(be.wait_for(VHOST_USER_SET_MEM_TABLE));
  be.locked([&](auto& b) {
    for (const Received& r : b.log()) {
      EXPECT_NE(r.msg.hdr.request, VHOST_USER_ADD_MEM_REG);
      if (r.msg.hdr.request != VHOST_USER_SET_MEM_TABLE) continue;
      EXPECT_EQ(r.msg.hdr.size, 8 + 2 * sizeof(VhostUserMemoryRegion));
      auto m = r.template body<VhostUserMemory>();
      EXPECT_EQ(m.nregions, 2u);
      EXPECT_EQ(m.regions[1].guest_phys_addr, SharedRam::kHighGpa);
      ASSERT_EQ(r.msg.fds.size(), 2u);
      EXPECT_EQ(inode(r.msg.fds[1].get()), inode(ram.fd(1)));
    }
  });
}

TEST_F(VuBlkTest, AnonymousGuestRamFailsTheActivationBeforeAnyRequest) {
  be.start();
  auto dev = create(1);
  ASSERT_TRUE(dev) << dev.error().message();
  std::vector<uint8_t> buf(1 << 20);
  GuestMemory anon = GuestMemory::wrap({MemoryRegion{0, buf.size(), buf.data(), 0}});
  auto irq = std::make_shared<virtio::testing::SignalCountingInterrupt>();
  auto r = (*dev)->activate(anon, (*dev)->device_features(), {SharedRam::queue(0)},
                            SharedRam::kicks(1), irq);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("not shareable"), std::string::npos) << r.error().message();
  EXPECT_EQ(be.requests(1).size(), 6u);  // the handshake only
  EXPECT_EQ(counter(**dev, "backend_connected"), 1u);
}

TEST_F(VuBlkTest, BackendHungAtActivationFailsItWithinTheReplyTimeout) {
  be.start();
  opts.reply_timeout = std::chrono::milliseconds(100);
  auto dev = create(1);
  ASSERT_TRUE(dev) << dev.error().message();
  be.locked([](auto& b) { b.mode = testing::FakeBackend::Mode::kHang; });
  SharedRam ram;
  auto irq = std::make_shared<virtio::testing::SignalCountingInterrupt>();
  auto r = activate(**dev, ram, 1, (*dev)->device_features(), irq);
  ASSERT_FALSE(r);
  const std::string m = r.error().message();
  EXPECT_NE(m.find(sock), std::string::npos) << m;
  EXPECT_NE(m.find("SET_FEATURES: no reply in 100 ms"), std::string::npos) << m;
  EXPECT_EQ(counter(**dev, "backend_protocol_errors"), 1u);
}

TEST_F(VuBlkTest, GarbageDuringActivationFailsItAndIsCounted) {
  be.start();
  auto dev = create(1);
  ASSERT_TRUE(dev) << dev.error().message();
  be.locked([](auto& b) {
    b.mode = testing::FakeBackend::Mode::kGarbage;
    b.garbage_at = VHOST_USER_GET_MAX_MEM_SLOTS;
  });
  SharedRam ram;
  auto irq = std::make_shared<virtio::testing::SignalCountingInterrupt>();
  auto r = activate(**dev, ram, 1, (*dev)->device_features(), irq);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("GET_MAX_MEM_SLOTS"), std::string::npos)
      << r.error().message();
  EXPECT_EQ(counter(**dev, "backend_protocol_errors"), 1u);
  EXPECT_EQ(counter(**dev, "backend_disconnects"), 1u);
  EXPECT_EQ(counter(**dev, "backend_connected"), 0u);
  // A later activation (after the driver's reset) connects again.
  be.locked([](auto& b) { b.mode = testing::FakeBackend::Mode::kNormal; });
  (*dev)->reset();
  ASSERT_TRUE(activate(**dev, ram, 1, (*dev)->device_features(), irq));
  EXPECT_TRUE(be.wait_for(VHOST_USER_SET_VRING_ENABLE, 1, 2));
  EXPECT_EQ(counter(**dev, "backend_connected"), 1u);
}

}  // namespace
}  // namespace tern::vhost_user
