// Checking a NetConfig (net_config.h) — one network interface as configured by --net,
// PUT /network-interfaces/{iface_id}, a config file's "network-interfaces" or a snapshot —
// before anything is created; and the MAC address's text form.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "virtio/net/net_config.h"

namespace tern {

/// Longest iface_id accepted (bytes).
inline constexpr size_t kMaxIfaceIdBytes = 64;
/// Longest tap name: IFNAMSIZ - 1 (linux/if.h), the kernel's limit on an interface name.
inline constexpr size_t kMaxTapNameBytes = 15;

/// Checks every field; errors name it under `where` as Firecracker's body does
/// ("network-interfaces[0].host_dev_name"; `where` empty: "host_dev_name"):
///   iface_id       1..64 bytes, printable ASCII
///   host_dev_name  1..15 bytes, no '/', no whitespace or control byte (a Linux interface name)
///   guest_mac      unicast (bit 0 of the first byte clear; virtio 1.2 §5.1.4 `mac`)
///   queue_pairs    1..kMaxNetQueuePairs ("queues")
///   mtu            68..65535 (RFC 791's minimum IPv4 MTU)
/// The vCPU bound on queue_pairs is checked with the VM (check_net_for_vm()).
[[nodiscard]] Result<void> check_net_config(const NetConfig& c, const std::string& where);

/// queue_pairs ≤ vcpus (a queue pair beyond the vCPU count is never used); the error's op is
/// "queues" (the caller prefixes where it came from) and names the interface.
[[nodiscard]] Result<void> check_net_for_vm(const NetConfig& c, uint32_t vcpus);

/// "aa:bb:cc:dd:ee:ff" (hex digits in either case, exactly six two-digit groups) → the address;
/// nullopt for anything else. Does not check unicast (check_net_config does).
[[nodiscard]] std::optional<MacAddress> parse_mac(std::string_view text);
/// The address as lower-case "aa:bb:cc:dd:ee:ff" (parse_mac's inverse).
[[nodiscard]] std::string format_mac(const MacAddress& mac);

}  // namespace tern
