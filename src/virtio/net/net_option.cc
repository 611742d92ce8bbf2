#include "virtio/net/net_option.h"

#include <charconv>

#include "base/key_value_list.h"
#include "base/printable.h"
#include "virtio/net/net_spec.h"

namespace tern {

namespace {

constexpr const char* kKeys = "keys: tap, mac, queues, vhost, mtu";

Result<uint64_t> parse_number(std::string_view v, const std::string& field, uint64_t min,
                              uint64_t max) {
  uint64_t n = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  bool whole = p == v.data() + v.size();
  if (v.empty() || !whole || (ec != std::errc() && ec != std::errc::result_out_of_range))
    return fail(field, "'" + printable(v) + "' is not a number");
  if (ec == std::errc::result_out_of_range || n < min || n > max)
    return fail(field, "'" + std::string(v) + "': must be " + std::to_string(min) + ".." +
                           std::to_string(max));
  return n;
}

}  // namespace

Result<NetConfig> parse_net_option(std::string_view text, std::string iface_id) {
  NetConfig c;
  c.iface_id = std::move(iface_id);
  bool tap_given = false;
  ASSIGN_OR_RETURN(auto items, split_key_values(text, "--net", kKeys));
  for (auto [k, value] : items) {
    std::string key(k);
    std::string field = "--net " + key;
    if (key == "tap") {
      c.host_dev_name = std::string(value);
      tap_given = true;
    } else if (key == "mac") {
      auto mac = parse_mac(value);
      if (!mac)
        return fail(field, "'" + printable(value) + "' is not a MAC address (aa:bb:cc:dd:ee:ff)");
      c.guest_mac = *mac;
    } else if (key == "queues") {
      ASSIGN_OR_RETURN(uint64_t n, parse_number(value, field, 1, kMaxNetQueuePairs));
      c.queue_pairs = static_cast<uint16_t>(n);
    } else if (key == "vhost") {
      if (value == "on") {
        c.vhost = true;
      } else if (value == "off") {
        c.vhost = false;
      } else {
        return fail(field, "'" + printable(value) + "': expected on or off");
      }
    } else if (key == "mtu") {
      ASSIGN_OR_RETURN(uint64_t n, parse_number(value, field, 68, 65535));
      c.mtu = static_cast<uint16_t>(n);
    } else {
      return fail(field, std::string("unknown key (") + kKeys + ")");
    }
  }
  if (!tap_given) return fail("--net tap", "missing: give tap=NAME (the tap device)");
  if (auto ok = check_net_config(c, ""); !ok) {
    // check_net_config names the JSON field; the option's keys are tap and mac.
    Error e = ok.error();
    if (e.op == "host_dev_name") e.op = "tap";
    if (e.op == "guest_mac") e.op = "mac";
    e.op = "--net " + e.op;
    return tl::unexpected(std::move(e));
  }
  return c;
}

}  // namespace tern
