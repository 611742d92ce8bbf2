// NetKind (device_kinds.h): virtio-net in the device registry.
#include <nlohmann/json.hpp>

#include "api/json_reader.h"
#include "virtio/net/net_option.h"
#include "virtio/net/net_spec.h"
#include "virtio/net/virtio_net.h"
#include "vmm/devices/device_kinds.h"

namespace tern {

// Errors also say which interface ("host_dev_name: eth0: tap0: TUNSETIFF: ...").
Result<std::shared_ptr<VirtioDevice>> NetKind::make(const Spec& s, const std::string& name) {
  auto d = make_virtio_net(s, name);
  // The same error reaches `tern run` users (who typed --net tap=) and API / config-file users
  // (host_dev_name): name the interface and both spellings of the field.
  if (!d)
    d.error().context = "interface " + s.iface_id + " (--net tap / host_dev_name): " +
                        d.error().context;
  return d;
}

namespace {

// Firecracker's rate limiters: tern does not shape network traffic (yet).
Result<void> refuse_rate_limiters(JsonReader& r) {
  for (const char* f : {"rx_rate_limiter", "tx_rate_limiter"})
    if (r.raw(f)) return fail(r.field(f), "not supported by tern");
  return {};
}

}  // namespace

Result<NetKind::Spec> NetKind::from_json(const nlohmann::json& j, const std::string& where) {
  ASSIGN_OR_RETURN(JsonReader r, JsonReader::open(j, where));
  NetConfig c;
  ASSIGN_OR_RETURN(c.iface_id, r.required_string("iface_id"));
  ASSIGN_OR_RETURN(c.host_dev_name, r.required_string("host_dev_name"));
  ASSIGN_OR_RETURN(auto mac, r.optional_string("guest_mac"));
  if (mac) {
    c.guest_mac = parse_mac(*mac);
    if (!c.guest_mac)
      return fail(r.field("guest_mac"), "\"" + *mac + "\" is not a MAC address (aa:bb:cc:dd:ee:ff)");
  }
  TRY(refuse_rate_limiters(r));
  ASSIGN_OR_RETURN(auto queues, r.optional_uint("queues", 1, kMaxNetQueuePairs));
  c.queue_pairs = static_cast<uint16_t>(queues.value_or(1));
  ASSIGN_OR_RETURN(auto vhost, r.optional_bool("vhost"));
  c.vhost = vhost.value_or(false);
  ASSIGN_OR_RETURN(auto mtu, r.optional_uint("mtu", 68, 65535));
  if (mtu) c.mtu = static_cast<uint16_t>(*mtu);
  TRY(r.finish());
  TRY(check_net_config(c, where));
  return c;
}

nlohmann::json NetKind::to_json(const Spec& c) {
  nlohmann::json j = {{"iface_id", c.iface_id}, {"host_dev_name", c.host_dev_name}};
  if (c.guest_mac) j["guest_mac"] = format_mac(*c.guest_mac);
  j["queues"] = c.queue_pairs;
  j["vhost"] = c.vhost;
  if (c.mtu) j["mtu"] = *c.mtu;
  return j;
}

Result<NetKind::Spec> NetKind::from_cli(std::string_view spec, std::string id) {
  return parse_net_option(spec, std::move(id));
}

Result<void> NetKind::from_patch_json(const nlohmann::json& j, const std::string& where) {
  ASSIGN_OR_RETURN(JsonReader r, JsonReader::open(j, where));
  ASSIGN_OR_RETURN(std::string id, r.required_string("iface_id"));
  TRY(refuse_rate_limiters(r));
  // Firecracker's PartialNetworkInterface has no other field; say what to do instead of
  // "unknown field" for the interface's own ones.
  for (const char* f : {"host_dev_name", "guest_mac", "queues", "vhost", "mtu"})
    if (r.raw(f))
      return fail(r.field(f), "cannot be changed by PATCH (PUT /network-interfaces/" + id +
                                  " before the VM starts)");
  TRY(r.finish());
  return {};
}

Result<void> NetKind::check_for_vm(const Spec& s, uint32_t vcpus) {
  return check_net_for_vm(s, vcpus);
}

Result<void> NetKind::check_against(const Spec& s, const Spec& other) {
  if (s.host_dev_name == other.host_dev_name)
    return fail("host_dev_name", s.iface_id + ": tap \"" + s.host_dev_name +
                                     "\" is already used by interface \"" + other.iface_id + "\"");
  if (s.guest_mac && s.guest_mac == other.guest_mac)
    return fail("guest_mac", s.iface_id + ": " + format_mac(*s.guest_mac) +
                                 " is already the MAC of interface \"" + other.iface_id + "\"");
  return {};
}

std::string NetKind::cli_key(std::string_view field) { return net_option_key(field); }

void NetKind::encode(snap::ByteWriter& w, const Spec& c) {
  w.string(c.iface_id);
  w.string(c.host_dev_name);
  w.boolean(c.guest_mac.has_value());
  if (c.guest_mac) w.bytes(*c.guest_mac);
  w.u16(c.queue_pairs);
  w.boolean(c.vhost);
  w.boolean(c.mtu.has_value());
  if (c.mtu) w.u16(*c.mtu);
}

Result<NetKind::Spec> NetKind::decode(snap::ByteReader& r) {
  Spec c;
  ASSIGN_OR_RETURN(c.iface_id, r.string(kMaxIfaceIdBytes));
  ASSIGN_OR_RETURN(c.host_dev_name, r.string(kMaxTapNameBytes));
  ASSIGN_OR_RETURN(bool has_mac, r.boolean());
  if (has_mac) {
    ASSIGN_OR_RETURN(auto b, r.bytes(6));
    MacAddress mac{};
    std::copy(b.begin(), b.end(), mac.begin());
    c.guest_mac = mac;
  }
  ASSIGN_OR_RETURN(c.queue_pairs, r.u16());
  ASSIGN_OR_RETURN(c.vhost, r.boolean());
  ASSIGN_OR_RETURN(bool has_mtu, r.boolean());
  if (has_mtu) {
    ASSIGN_OR_RETURN(uint16_t mtu, r.u16());
    c.mtu = mtu;
  }
  if (auto ok = check_net_config(c, "network-interfaces"); !ok)
    return fail(r.what(), ok.error().message());
  return c;
}

}  // namespace tern
