// The --net SPEC parser (net_option.h).
#include "virtio/net/net_option.h"

#include <gtest/gtest.h>

namespace tern {
namespace {

std::string error_of(std::string_view spec) {
  auto r = parse_net_option(spec, "net0");
  return r ? "(ok)" : r.error().message();
}

TEST(NetOption, TapAlone) {
  auto c = parse_net_option("tap=tap0", "net1");
  ASSERT_TRUE(c) << c.error().message();
  EXPECT_EQ(c->iface_id, "net1");
  EXPECT_EQ(c->host_dev_name, "tap0");
  EXPECT_FALSE(c->guest_mac);
  EXPECT_EQ(c->queue_pairs, 1);
  EXPECT_FALSE(c->vhost);
  EXPECT_FALSE(c->mtu);
}

TEST(NetOption, EveryKey) {
  auto c = parse_net_option("mtu=9000,vhost=on,queues=4,mac=02:00:00:00:00:2A,tap=t", "net0");
  ASSERT_TRUE(c) << c.error().message();
  EXPECT_EQ(c->host_dev_name, "t");
  EXPECT_EQ(c->guest_mac, (MacAddress{2, 0, 0, 0, 0, 0x2a}));
  EXPECT_EQ(c->queue_pairs, 4);
  EXPECT_TRUE(c->vhost);
  EXPECT_EQ(c->mtu, 9000);
  auto off = parse_net_option("tap=t,vhost=off", "net0");
  ASSERT_TRUE(off);
  EXPECT_FALSE(off->vhost);
}

TEST(NetOption, NamesEachBadField) {
  EXPECT_EQ(error_of(""), "--net tap: missing: give tap=NAME (the tap device)");
  EXPECT_EQ(error_of("mac=02:00:00:00:00:01"), "--net tap: missing: give tap=NAME (the tap device)");
  EXPECT_EQ(error_of("tap="), "--net tap: must not be empty");
  EXPECT_EQ(error_of("tap=abcdefghijklmnop"),
            "--net tap: 16 bytes: a Linux interface name is at most 15 (IFNAMSIZ - 1)");
  EXPECT_EQ(error_of("tap=a/b"), "--net tap: must not contain '/'");
  EXPECT_EQ(error_of("tap=t,mac=02:00:00:00:00"),
            "--net mac: '02:00:00:00:00' is not a MAC address (aa:bb:cc:dd:ee:ff)");
  EXPECT_EQ(error_of("tap=t,mac=01:00:00:00:00:00"),
            "--net mac: 01:00:00:00:00:00: a multicast address (the first byte is odd)");
  EXPECT_EQ(error_of("tap=t,queues=0"), "--net queues: '0': must be 1..254");
  EXPECT_EQ(error_of("tap=t,queues=255"), "--net queues: '255': must be 1..254");
  EXPECT_EQ(error_of("tap=t,queues=99999999999999999999999"),
            "--net queues: '99999999999999999999999': must be 1..254");
  EXPECT_EQ(error_of("tap=t,queues=two"), "--net queues: 'two' is not a number");
  EXPECT_EQ(error_of("tap=t,queues=-1"), "--net queues: '-1' is not a number");
  EXPECT_EQ(error_of("tap=t,vhost=yes"), "--net vhost: 'yes': expected on or off");
  EXPECT_EQ(error_of("tap=t,mtu=67"), "--net mtu: '67': must be 68..65535");
  EXPECT_EQ(error_of("tap=t,mtu=65536"), "--net mtu: '65536': must be 68..65535");
  EXPECT_EQ(error_of("tap=t,speed=10"),
            "--net speed: unknown key (keys: tap, mac, queues, vhost, mtu)");
  EXPECT_EQ(error_of("tap=t,tap=u"), "--net tap: given more than once");
  EXPECT_EQ(error_of("tap"), "--net: 'tap' is not key=value (keys: tap, mac, queues, vhost, mtu)");
}

}  // namespace
}  // namespace tern
