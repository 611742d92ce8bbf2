// Tap and VirtioNet over a real tap (/dev/net/tun; skipped where a tap cannot be created): open
// single and multi queue, the offload probe, EBUSY explained, a multi_queue tap opened with one
// pair, TUNSETQUEUE; the device moving frames both ways through a tap brought up (an AF_PACKET
// socket on it plays the host), a down tap's EIO counted, vhost=on falling back.
#include "virtio/net/tap.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <cstring>
#include <fstream>

#include <gtest/gtest.h>

#include "virtio/net/net_header.h"
#include "virtio/net/virtio_net.h"
#include "virtio/net/virtio_net_device.h"
#include "virtio/testing/fake_virtqueue_driver.h"

namespace tern {
namespace {

using namespace net;
using testing::FakeGuestRam;
using testing::FakeVirtioInterrupt;
using testing::FakeVirtqueueDriver;
using virtio::feature;

constexpr uint16_t kEtherType = 0x88b5;  // IEEE local experimental

std::string tap_name(const char* tag) { return std::string("tt") + tag + std::to_string(::getpid() % 100000); }

// Skips the test unless a tap can be created here.
#define REQUIRE_TAP(name, pairs)                                                     \
  auto tap_or = Tap::open(name, pairs);                                              \
  if (!tap_or) GTEST_SKIP() << "no tap here: " << tap_or.error().message();          \
  Tap& tap = *tap_or

bool set_up(const std::string& name) {
  // No IPv6 chatter (router solicitations) on the test tap, then IFF_UP.
  std::ofstream("/proc/sys/net/ipv6/conf/" + name + "/disable_ipv6") << "1";
  UniqueFd s(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, name.c_str(), IFNAMSIZ - 1);
  if (!s.valid() || ::ioctl(s.get(), SIOCGIFFLAGS, &ifr) != 0) return false;
  ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP);
  return ::ioctl(s.get(), SIOCSIFFLAGS, &ifr) == 0;
}

// An Ethernet frame of ethertype kEtherType with a recognisable payload.
std::vector<uint8_t> eth_frame(uint8_t seed, size_t payload) {
  std::vector<uint8_t> f = {0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2,
                            kEtherType >> 8, kEtherType & 0xff};
  for (size_t i = 0; i < payload; ++i) f.push_back(static_cast<uint8_t>(seed + i));
  return f;
}

TEST(TapTest, OpenProbeBusyAndMultiQueue) {
  const std::string name = tap_name("a");
  REQUIRE_TAP(name, 1);
  EXPECT_EQ(tap.pairs(), 1);
  EXPECT_FALSE(tap.multi_queue());
  EXPECT_TRUE(tap.supported_offloads() & TUN_F_CSUM);
  ASSERT_TRUE(tap.set_offloads(tap.supported_offloads()));
  ASSERT_TRUE(tap.set_offloads(0));
  EXPECT_TRUE(tap.set_attached(0, false));  // single queue: no-op

  auto busy = Tap::open(name, 1);
  ASSERT_FALSE(busy);
  EXPECT_EQ(busy.error().op, "host_dev_name");
  EXPECT_NE(busy.error().message().find("EBUSY"), std::string::npos) << busy.error().message();
  auto mq_on_single = Tap::open(name, 2);
  ASSERT_FALSE(mq_on_single);
  EXPECT_NE(mq_on_single.error().message().find("multi_queue"), std::string::npos)
      << mq_on_single.error().message();

  const std::string mq_name = tap_name("m");
  auto mq = Tap::open(mq_name, 2);
  ASSERT_TRUE(mq) << mq.error().message();
  EXPECT_TRUE(mq->multi_queue());
  EXPECT_TRUE(mq->set_attached(1, false));
  EXPECT_FALSE(mq->attached(1));
  // A detached queue reads nothing (EAGAIN), it is not an error: its RX worker just waits.
  uint8_t buf[64];
  EXPECT_EQ(::read(mq->fd(1).get(), buf, sizeof buf), -1);
  EXPECT_EQ(errno, EAGAIN);
  EXPECT_TRUE(mq->set_attached(1, true));
  // A multi_queue tap opened with one pair: TUNSETIFF EINVAL, then IFF_MULTI_QUEUE.
  auto one = Tap::open(mq_name, 1);
  ASSERT_TRUE(one) << one.error().message();
  EXPECT_TRUE(one->multi_queue());

  auto bad = Tap::open("a-name-far-too-long", 1);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().op, "host_dev_name");
}

class RealTapDeviceTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (dev_) dev_->reset();
  }
  void activate(uint64_t acked) {
    std::vector<VirtqueueConfig> qs;
    std::vector<UniqueFd> kicks;
    for (uint16_t i = 0; i < dev_->num_queues(); ++i) {
      auto k = make_eventfd(0, 0);
      kicks_.emplace_back(::dup(k->get()));
      kicks.push_back(std::move(*k));
      drv_.push_back(std::make_unique<FakeVirtqueueDriver>(ram_.mem(), 0x10000 + i * 0x4000ull, 16));
      qs.push_back(drv_.back()->config());
    }
    auto r = dev_->activate(ram_.mem(), acked, qs, std::move(kicks), irq_);
    ASSERT_TRUE(r) << r.error().message();
  }
  void kick(uint16_t q) {
    uint64_t one = 1;
    ASSERT_EQ(::write(kicks_[q].get(), &one, sizeof one), 8);
  }
  bool wait_used(uint16_t q, uint16_t idx) {
    return irq_->wait_until([&] { return drv_[q]->used_idx() == idx; });
  }
  uint64_t named(const std::string& n) {
    for (const auto& [k, v] : dev_->counters().counters)
      if (k == n) return v;
    ADD_FAILURE() << n;
    return 0;
  }
  /// Writes the 12-byte header + `f` at 0x80000 and sends it on transmitq 0.
  void transmit(const std::vector<uint8_t>& f, uint16_t want_used) {
    std::vector<uint8_t> b(kNetHdrSize, 0);
    b.insert(b.end(), f.begin(), f.end());
    (void)ram_.mem().write(0x80000, b);
    drv_[1]->add_chain({{0x80000, static_cast<uint32_t>(b.size()), false}});
    kick(1);
    ASSERT_TRUE(wait_used(1, want_used));
  }

  FakeGuestRam ram_;
  std::shared_ptr<FakeVirtioInterrupt> irq_ = std::make_shared<FakeVirtioInterrupt>();
  std::shared_ptr<VirtioNet> dev_;
  std::vector<std::unique_ptr<FakeVirtqueueDriver>> drv_;
  std::vector<UniqueFd> kicks_;
};

TEST_F(RealTapDeviceTest, FramesBothWaysAndDownTapCounted) {
  NetConfig cfg;
  cfg.iface_id = "net0";
  cfg.host_dev_name = tap_name("d");
  cfg.vhost = true;  // no /dev/vhost-net here, or it works: either way the device serves
  auto d = make_virtio_net(cfg, "virtio-net0");
  if (!d) GTEST_SKIP() << "no tap here: " << d.error().message();
  dev_ = std::dynamic_pointer_cast<VirtioNet>(*d);
  ASSERT_TRUE(dev_);
  if (dev_->vhost()) GTEST_SKIP() << "vhost-net serves the queues: no userspace path to test";
  activate(feature(virtio::VIRTIO_F_VERSION_1) | feature(VIRTIO_NET_F_MRG_RXBUF) |
           feature(VIRTIO_NET_F_CTRL_VQ));

  // Down: the tap refuses the frame with EIO; dropped, counted, used len 0.
  transmit(eth_frame(1, 50), 1);
  EXPECT_EQ(drv_[1]->used_elem(0).len, 0u);
  EXPECT_EQ(named("tx_dropped_tap_error"), 1u);

  if (!set_up(cfg.host_dev_name)) GTEST_SKIP() << "cannot bring the tap up";
  UniqueFd pkt(::socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(kEtherType)));
  if (!pkt.valid()) GTEST_SKIP() << "no AF_PACKET socket";
  sockaddr_ll sll{};
  sll.sll_family = AF_PACKET;
  sll.sll_protocol = htons(kEtherType);
  sll.sll_ifindex = static_cast<int>(::if_nametoindex(cfg.host_dev_name.c_str()));
  ASSERT_EQ(::bind(pkt.get(), reinterpret_cast<sockaddr*>(&sll), sizeof sll), 0);

  // Guest → host: the frame appears on the tap byte-exact.
  auto out = eth_frame(7, 100);
  transmit(out, 2);
  EXPECT_EQ(named("tx_packets"), 1u);
  pollfd p{pkt.get(), POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 20000), 1);
  std::vector<uint8_t> got(2000);
  ssize_t n = ::recv(pkt.get(), got.data(), got.size(), 0);
  got.resize(n < 0 ? 0 : static_cast<size_t>(n));
  EXPECT_EQ(got, out);

  // Host → guest: sent on the tap, read into the RX buffer after its header.
  drv_[0]->add_chain({{0x90000, 4096, true}});
  kick(0);
  auto in = eth_frame(9, 200);
  ASSERT_EQ(::sendto(pkt.get(), in.data(), in.size(), 0, reinterpret_cast<sockaddr*>(&sll),
                     sizeof sll),
            static_cast<ssize_t>(in.size()));
  ASSERT_TRUE(wait_used(0, 1));
  EXPECT_EQ(drv_[0]->used_elem(0).len, kNetHdrSize + in.size());
  std::vector<uint8_t> rx(in.size());
  (void)ram_.mem().read(0x90000 + kNetHdrSize, rx);
  EXPECT_EQ(rx, in);
  EXPECT_EQ(named("rx_packets"), 1u);
  EXPECT_GE(named("tap_tx_packets"), 1u);  // the tap's own count of frames towards us
}

}  // namespace
}  // namespace tern
