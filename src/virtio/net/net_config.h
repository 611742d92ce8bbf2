// NetConfig: one virtio-net interface as the user configured it (`tern run --net`,
// PUT /network-interfaces/{iface_id}, the config file's "network-interfaces"). A plain value,
// checked by check_net_config() (net_spec.h) before any VM is built.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

namespace tern {

/// An Ethernet MAC address, in wire order.
using MacAddress = std::array<uint8_t, 6>;

/// Most queue pairs one interface may have (virtio 1.2 §5.1.4: max_virtqueue_pairs ≤ 0x8000;
/// tern bounds it by kMaxVcpus as a queue pair beyond the vCPU count is never used).
inline constexpr uint16_t kMaxNetQueuePairs = 254;

/// See the file comment. Firecracker's NetworkInterface fields plus tern's extensions.
struct NetConfig {
  std::string iface_id;       ///< Firecracker iface_id; `--net` interfaces are "net0", "net1", ...
  std::string host_dev_name;  ///< The tap's name (1..15 bytes, IFNAMSIZ - 1); opened by name.
  /// Firecracker guest_mac; absent: VIRTIO_NET_F_MAC is not offered and the guest picks one.
  std::optional<MacAddress> guest_mac;
  uint16_t queue_pairs = 1;   ///< `queues=N`: N RX/TX queue pairs (MQ when > 1), ≤ vCPUs.
  bool vhost = false;         ///< `vhost=on`: RX/TX served by /dev/vhost-net (fallback: userspace).
  /// `mtu=N` (68..65535): VIRTIO_NET_F_MTU offered with this value. Absent: not offered (1500).
  std::optional<uint16_t> mtu;
  bool operator==(const NetConfig&) const = default;
};

}  // namespace tern
