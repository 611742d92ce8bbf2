// The --net command-line option: "tap=NAME[,mac=MAC][,queues=N][,vhost=on|off][,mtu=N]" parsed
// into a NetConfig (virtio/net/net_config.h).
#pragma once

#include <string>
#include <string_view>

#include "base/result.h"
#include "virtio/net/net_config.h"

namespace tern {

/// Parses one --net value into the interface `iface_id` ("net0" for the first --net). Keys, each
/// at most once, in any order:
///   tap=NAME        the tap device to open (required; 1..15 bytes)
///   mac=MAC         the guest's MAC, "aa:bb:cc:dd:ee:ff" (unicast); absent: the guest picks one
///   queues=N        RX/TX queue pairs (1..254, at most the VM's vCPUs; default 1)
///   vhost=on|off    serve RX/TX with /dev/vhost-net (default off)
///   mtu=N           the MTU offered to the guest (68..65535; default: not offered)
/// Errors name the field ("--net mac: ..."). The result passes check_net_config().
[[nodiscard]] Result<NetConfig> parse_net_option(std::string_view text, std::string iface_id);

}  // namespace tern
