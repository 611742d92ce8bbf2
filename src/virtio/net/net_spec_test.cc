// check_net_config, check_net_for_vm, parse_mac / format_mac (net_spec.h).
#include "virtio/net/net_spec.h"

#include <gtest/gtest.h>

namespace tern {
namespace {

NetConfig good() {
  NetConfig c;
  c.iface_id = "eth0";
  c.host_dev_name = "tap0";
  return c;
}

std::string error_of(const NetConfig& c, const std::string& where = "network-interfaces[0]") {
  auto r = check_net_config(c, where);
  return r ? "(ok)" : r.error().message();
}

TEST(NetSpec, AcceptsAGoodConfig) {
  NetConfig c = good();
  EXPECT_EQ(error_of(c), "(ok)");
  c.guest_mac = MacAddress{0x02, 0, 0, 0, 0, 1};
  c.queue_pairs = kMaxNetQueuePairs;
  c.mtu = 68;
  c.host_dev_name = std::string(15, 't');
  c.iface_id = std::string(64, 'i');
  EXPECT_EQ(error_of(c), "(ok)");
  c.mtu = 65535;
  EXPECT_EQ(error_of(c), "(ok)");
}

TEST(NetSpec, NamesEachBadField) {
  NetConfig c = good();
  c.host_dev_name = "";
  EXPECT_EQ(error_of(c), "network-interfaces[0].host_dev_name: must not be empty");
  c.host_dev_name = std::string(16, 't');
  EXPECT_EQ(error_of(c), "network-interfaces[0].host_dev_name: 16 bytes: a Linux interface name "
                         "is at most 15 (IFNAMSIZ - 1)");
  c.host_dev_name = "a/b";
  EXPECT_EQ(error_of(c), "network-interfaces[0].host_dev_name: must not contain '/'");
  c.host_dev_name = "tap 0";
  EXPECT_EQ(error_of(c, ""), "host_dev_name: must not contain whitespace or control bytes");
  c.host_dev_name = "tap\n";
  EXPECT_EQ(error_of(c, ""), "host_dev_name: must not contain whitespace or control bytes");
  c = good();
  c.guest_mac = MacAddress{0x01, 0, 0x5e, 0, 0, 1};
  EXPECT_EQ(error_of(c, ""), "guest_mac: 01:00:5e:00:00:01: a multicast address (the first byte is odd)");
  c = good();
  c.queue_pairs = 0;
  EXPECT_EQ(error_of(c, ""), "queues: 0: must be 1..254");
  c.queue_pairs = kMaxNetQueuePairs + 1;
  EXPECT_EQ(error_of(c, ""), "queues: 255: must be 1..254");
  c = good();
  c.mtu = 67;
  EXPECT_EQ(error_of(c, ""), "mtu: 67: must be 68..65535");
  c = good();
  c.iface_id = "";
  EXPECT_EQ(error_of(c, ""), "iface_id: must not be empty");
  c.iface_id = std::string(65, 'i');
  EXPECT_EQ(error_of(c, ""), "iface_id: longer than 64 bytes");
  c.iface_id = "eth\x1b";
  EXPECT_EQ(error_of(c, ""), "iface_id: must be printable ASCII without spaces");
}

TEST(NetSpec, QueuePairsAtMostTheVcpus) {
  NetConfig c = good();
  c.queue_pairs = 2;
  EXPECT_TRUE(check_net_for_vm(c, 2));
  auto r = check_net_for_vm(c, 1);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message(), "queues: eth0: 2 queue pairs, more than the VM's 1 vCPU");
}

TEST(NetSpec, MacText) {
  auto m = parse_mac("AA:bb:0c:dd:ee:Ff");
  ASSERT_TRUE(m);
  EXPECT_EQ(*m, (MacAddress{0xaa, 0xbb, 0x0c, 0xdd, 0xee, 0xff}));
  EXPECT_EQ(format_mac(*m), "aa:bb:0c:dd:ee:ff");
  EXPECT_EQ(parse_mac(format_mac(*m)), m);
  for (const char* bad : {"", "aa:bb:cc:dd:ee", "aa:bb:cc:dd:ee:ff:00", "aa-bb-cc-dd-ee-ff",
                          "a:bb:cc:dd:ee:fff", "gg:bb:cc:dd:ee:ff", "aa:bb:cc:dd:ee:f ",
                          "aabb.ccdd.eeff...", " aa:bb:cc:dd:ee:f"})
    EXPECT_FALSE(parse_mac(bad)) << bad;
}

}  // namespace
}  // namespace tern
