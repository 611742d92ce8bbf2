#include "virtio/net/net_spec.h"

#include <fmt/format.h>

namespace tern {

namespace {

std::string field(const std::string& where, const char* name) {
  return where.empty() ? std::string(name) : where + "." + name;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

Result<void> check_net_config(const NetConfig& c, const std::string& where) {
  if (c.iface_id.empty()) return fail(field(where, "iface_id"), "must not be empty");
  if (c.iface_id.size() > kMaxIfaceIdBytes)
    return fail(field(where, "iface_id"), "longer than 64 bytes");
  for (char ch : c.iface_id)
    if (ch < 0x21 || ch > 0x7e)
      return fail(field(where, "iface_id"), "must be printable ASCII without spaces");
  const std::string& tap = c.host_dev_name;
  if (tap.empty()) return fail(field(where, "host_dev_name"), "must not be empty");
  if (tap.size() > kMaxTapNameBytes)
    return fail(field(where, "host_dev_name"),
                fmt::format("{} bytes: a Linux interface name is at most 15 (IFNAMSIZ - 1)",
                            tap.size()));
  for (char ch : tap) {
    if (ch == '/') return fail(field(where, "host_dev_name"), "must not contain '/'");
    auto u = static_cast<unsigned char>(ch);
    if (u <= 0x20 || u == 0x7f)
      return fail(field(where, "host_dev_name"), "must not contain whitespace or control bytes");
  }
  if (c.guest_mac && ((*c.guest_mac)[0] & 1))
    return fail(field(where, "guest_mac"),
                format_mac(*c.guest_mac) + ": a multicast address (the first byte is odd)");
  if (c.queue_pairs < 1 || c.queue_pairs > kMaxNetQueuePairs)
    return fail(field(where, "queues"),
                fmt::format("{}: must be 1..{}", c.queue_pairs, kMaxNetQueuePairs));
  if (c.mtu && *c.mtu < 68)
    return fail(field(where, "mtu"), fmt::format("{}: must be 68..65535", *c.mtu));
  return {};
}

Result<void> check_net_for_vm(const NetConfig& c, uint32_t vcpus) {
  if (c.queue_pairs > vcpus)
    return fail("queues", fmt::format("{}: {} queue pairs, more than the VM's {} vCPU{}",
                                      c.iface_id, c.queue_pairs, vcpus, vcpus == 1 ? "" : "s"));
  return {};
}

std::optional<MacAddress> parse_mac(std::string_view text) {
  if (text.size() != 17) return std::nullopt;
  MacAddress mac{};
  for (size_t i = 0; i < 6; ++i) {
    int hi = hex_digit(text[i * 3]), lo = hex_digit(text[i * 3 + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    if (i < 5 && text[i * 3 + 2] != ':') return std::nullopt;
    mac[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return mac;
}

std::string format_mac(const MacAddress& m) {
  return fmt::format("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4],
                     m[5]);
}

}  // namespace tern
