// NetKind (net_kind.cc): the JSON body round trip; put_device()/device_id() for a keyed kind.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "vmm/devices/device_surfaces.h"

namespace tern {
namespace {

TEST(NetKind, JsonRoundTrip) {
  NetSpec c;
  c.iface_id = "eth0";
  c.host_dev_name = "tap0";
  c.guest_mac = MacAddress{0x02, 0, 0, 0, 0, 9};
  c.queue_pairs = 3;
  c.vhost = true;
  c.mtu = 1280;
  auto back = NetKind::from_json(NetKind::to_json(c), "network-interfaces[0]");
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(*back, c);
  NetSpec plain;
  plain.iface_id = "net0";
  plain.host_dev_name = "t";
  EXPECT_EQ(NetKind::to_json(plain), nlohmann::json::parse(
      R"({"iface_id": "net0", "host_dev_name": "t", "queues": 1, "vhost": false})"));
  EXPECT_EQ(device_id(DeviceSpec(std::in_place_type<NetSpec>, plain)), "net0");
  EXPECT_FALSE(device_id(DeviceSpec(std::in_place_type<RngSpec>, RngSpec{})));
}

// put_device: a keyed kind replaces by id, else appends after the others of its kind.
TEST(NetKind, PutDeviceIsKeyed) {
  std::vector<DeviceSpec> devices;
  auto net = [](const char* id, const char* tap) {
    NetSpec c;
    c.iface_id = id;
    c.host_dev_name = tap;
    return DeviceSpec(std::in_place_type<NetSpec>, c);
  };
  put_device(devices, net("a", "t1"));
  put_device(devices, net("b", "t2"));
  put_device(devices, DeviceSpec(std::in_place_type<RngSpec>, RngSpec{}));
  put_device(devices, net("a", "t3"));
  ASSERT_EQ(devices.size(), 3u);
  EXPECT_TRUE(std::holds_alternative<RngSpec>(devices[0]));
  EXPECT_EQ(std::get<NetSpec>(devices[1]).host_dev_name, "t3");
  EXPECT_EQ(std::get<NetSpec>(devices[2]).iface_id, "b");
  EXPECT_TRUE(has_device(devices, devices[1].index(), "b"));
  EXPECT_FALSE(has_device(devices, devices[1].index(), "c"));
}

}  // namespace
}  // namespace tern

namespace tern {
namespace {

DeviceSpec net_on(const char* id, const char* tap, std::optional<MacAddress> mac = {}) {
  NetSpec c;
  c.iface_id = id;
  c.host_dev_name = tap;
  c.guest_mac = mac;
  return DeviceSpec(std::in_place_type<NetSpec>, c);
}

// Two interfaces on one tap would share (and steal) its queues; two with one MAC confuse the
// guest's bridge: both refused before the VM is built, naming the second one's field.
TEST(NetKind, RefusesSharedTapOrMac) {
  const MacAddress mac{0x02, 0, 0, 0, 0, 1};
  std::vector<DeviceSpec> devices;
  put_device(devices, net_on("a", "tap0", mac));
  put_device(devices, DeviceSpec(std::in_place_type<RngSpec>, RngSpec{}));
  put_device(devices, net_on("b", "tap1"));
  EXPECT_TRUE(check_devices_for_vm(devices, 1, false));
  put_device(devices, net_on("c", "tap0"));
  auto r = check_devices_for_vm(devices, 1, false);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().op, "network-interfaces[2].host_dev_name");
  EXPECT_NE(r.error().message().find("\"a\""), std::string::npos) << r.error().message();
  r = check_devices_for_vm(devices, 1, true);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().op, "--net tap");
  put_device(devices, net_on("c", "tap2", mac));
  r = check_devices_for_vm(devices, 1, false);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().op, "network-interfaces[2].guest_mac");
  put_device(devices, net_on("c", "tap2", MacAddress{0x02, 0, 0, 0, 0, 2}));
  EXPECT_TRUE(check_devices_for_vm(devices, 1, false));
}

}  // namespace
}  // namespace tern

namespace tern {
namespace {

TEST(NetKind, OpenErrorsNameTheInterfaceAndBothSpellingsOfTheField) {
  if (::access("/dev/net/tun", R_OK | W_OK) != 0) GTEST_SKIP() << "no /dev/net/tun";
  NetSpec s;
  s.iface_id = "net0";
  s.host_dev_name = "lo";  // exists and is not a tap: TUNSETIFF refuses it (EINVAL)
  auto d = NetKind::make(s, "virtio-net0");
  ASSERT_FALSE(d);
  const std::string m = d.error().message();
  EXPECT_NE(m.find("interface net0 (--net tap / host_dev_name)"), std::string::npos) << m;
  EXPECT_NE(m.find("is not a tap"), std::string::npos) << m;
}

}  // namespace
}  // namespace tern
