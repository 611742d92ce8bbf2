#include "vhost_user/frontend_client.h"

#include <cstring>

#include "base/checked.h"
#include "vhost_user/vhost_user_internal.h"

namespace tern::vhost_user {

namespace {

/// Rewrites a channel or parser error as "vhost-user PATH: REQUEST[ reply]: what" (errno kept,
/// except for a timeout, which says how long it waited).
Error name_error(const std::string& path, uint32_t request, Error e,
                 std::chrono::milliseconds timeout) {
  Error out;
  out.op = "vhost-user " + path;
  const std::string req = short_request_name(request);
  const std::string vu = "vhost-user ";
  if (e.errnum == ETIMEDOUT && e.op == "vhost-user") {
    out.context = req + ": " + (e.context.starts_with("no message")
                                    ? "no reply in " + std::to_string(timeout.count()) + " ms"
                                    : e.context);
    return out;
  }
  if (e.op == "vhost-user") {
    out.context = req + ": " + e.context;  // a channel error
  } else if (e.op.starts_with(vu)) {
    out.context = e.op.substr(vu.size()) + (e.context.empty() ? "" : ": " + e.context);
  } else {
    out.context = req + ": " + e.message();
    return out;
  }
  out.errnum = e.errnum;
  return out;
}

}  // namespace

Result<FrontendClient> FrontendClient::connect(const std::string& socket_path,
                                               std::chrono::milliseconds reply_timeout) {
  ASSIGN_OR_RETURN(Channel ch, Channel::connect(socket_path));
  return FrontendClient(std::move(ch), socket_path, reply_timeout);
}

FrontendClient::FrontendClient(Channel channel, std::string socket_path,
                               std::chrono::milliseconds reply_timeout)
    : channel_(std::move(channel)), path_(std::move(socket_path)), timeout_(reply_timeout) {
  channel_.set_send_timeout(timeout_ < std::chrono::milliseconds(0) ? kReplyTimeout : timeout_);
}

// Every request goes through one of these. `ack`: the request has no reply of its own, so with
// REPLY_ACK negotiated it is sent with NEED_REPLY and the ack is awaited.
namespace {

struct Exchange {
  Channel& ch;
  const std::string& path;
  std::chrono::milliseconds timeout;

  Result<void> send(uint32_t request, std::span<const uint8_t> body, bool need_reply,
                    std::span<const int> fds) {
    auto r = ch.send(make_request(request, body, need_reply), fds);
    if (!r) return tl::unexpected(name_error(path, request, std::move(r).error(), timeout));
    return {};
  }
  Result<Message> recv(uint32_t request) {
    auto r = ch.recv(timeout);
    if (!r) return tl::unexpected(name_error(path, request, std::move(r).error(), timeout));
    return std::move(*r);
  }
  template <class T>
  Result<T> named(uint32_t request, Result<T> r) {
    if (!r) return tl::unexpected(name_error(path, request, std::move(r).error(), timeout));
    return r;
  }
};

template <class T>
std::span<const uint8_t> bytes_of(const T& v) {
  return {reinterpret_cast<const uint8_t*>(&v), sizeof v};
}

}  // namespace

Result<void> FrontendClient::send_no_reply(uint32_t request, std::span<const uint8_t> body,
                                           std::span<const int> fds) {
  if (broken_) return fail("vhost-user " + path_, short_request_name(request) +
                                                      ": connection unusable after an earlier error");
  Exchange x{channel_, path_, timeout_};
  const bool ack = has_protocol_feature(VHOST_USER_PROTOCOL_F_REPLY_ACK);
  broken_ = true;  // until the exchange completes
  TRY(x.send(request, body, ack, fds));
  if (ack) {
    ASSIGN_OR_RETURN(Message reply, x.recv(request));
    TRY(x.named(request, parse_ack_reply(reply, request)));
  }
  broken_ = false;
  return {};
}

Result<Message> FrontendClient::send_with_reply(uint32_t request, std::span<const uint8_t> body) {
  if (broken_) return fail("vhost-user " + path_, short_request_name(request) +
                                                      ": connection unusable after an earlier error");
  Exchange x{channel_, path_, timeout_};
  broken_ = true;  // the caller clears it once the reply parsed
  TRY(x.send(request, body, false, {}));
  return x.recv(request);
}

template <class T>
Result<T> FrontendClient::parsed(uint32_t request, Result<T> r) {
  Exchange x{channel_, path_, timeout_};
  auto out = x.named(request, std::move(r));
  broken_ = !out;
  return out;
}

Result<uint64_t> FrontendClient::get_u64(uint32_t request) {
  ASSIGN_OR_RETURN(Message reply, send_with_reply(request, {}));
  return parsed(request, parse_u64_reply(reply, request));
}

Result<uint64_t> FrontendClient::get_features() { return get_u64(VHOST_USER_GET_FEATURES); }

Result<void> FrontendClient::set_features(uint64_t features) {
  return send_no_reply(VHOST_USER_SET_FEATURES, bytes_of(features), {});
}

Result<uint64_t> FrontendClient::get_protocol_features() {
  return get_u64(VHOST_USER_GET_PROTOCOL_FEATURES);
}

Result<void> FrontendClient::set_protocol_features(uint64_t features) {
  // Never acked: REPLY_ACK is itself being negotiated here (QEMU does the same).
  protocol_features_ = 0;
  TRY(send_no_reply(VHOST_USER_SET_PROTOCOL_FEATURES, bytes_of(features), {}));
  protocol_features_ = features;
  return {};
}

Result<uint64_t> FrontendClient::get_queue_num() { return get_u64(VHOST_USER_GET_QUEUE_NUM); }

Result<void> FrontendClient::set_owner() { return send_no_reply(VHOST_USER_SET_OWNER, {}, {}); }

Result<std::vector<uint8_t>> FrontendClient::get_config(uint32_t size) {
  if (size > VHOST_USER_MAX_CONFIG_SIZE)
    return fail("vhost-user " + path_, "GET_CONFIG: " + std::to_string(size) +
                                           " bytes asked, at most 256");
  // The request carries the header and `size` bytes (zero), the reply the same with the data.
  std::vector<uint8_t> body(sizeof(VhostUserConfigHeader) + size, 0);
  VhostUserConfigHeader h{0, size, 0};
  std::memcpy(body.data(), &h, sizeof h);
  ASSIGN_OR_RETURN(Message reply, send_with_reply(VHOST_USER_GET_CONFIG, body));
  return parsed(VHOST_USER_GET_CONFIG, parse_config_reply(reply, size));
}

Result<uint64_t> FrontendClient::get_max_mem_slots() {
  return get_u64(VHOST_USER_GET_MAX_MEM_SLOTS);
}

Result<void> FrontendClient::set_mem_table(std::span<const VhostUserMemoryRegion> regions,
                                           std::span<const int> fds) {
  if (regions.size() > VHOST_MEMORY_BASELINE_NREGIONS || regions.size() != fds.size())
    return fail("vhost-user " + path_, "SET_MEM_TABLE: " + std::to_string(regions.size()) +
                                           " regions with " + std::to_string(fds.size()) +
                                           " fds (at most 8, one fd each)");
  VhostUserMemory mem;
  mem.nregions = static_cast<uint32_t>(regions.size());
  for (size_t i = 0; i < regions.size(); ++i) mem.regions[i] = regions[i];
  const size_t wire = offsetof(VhostUserMemory, regions) + regions.size() * sizeof regions[0];
  return send_no_reply(VHOST_USER_SET_MEM_TABLE, bytes_of(mem).first(wire), fds);
}

Result<void> FrontendClient::add_mem_reg(const VhostUserMemoryRegion& region, int fd) {
  VhostUserMemRegMsg m;
  m.region = region;
  int fds[1] = {fd};
  return send_no_reply(VHOST_USER_ADD_MEM_REG, bytes_of(m), fds);
}

Result<InflightReply> FrontendClient::get_inflight_fd(uint16_t num_queues, uint16_t queue_size) {
  VhostUserInflight req;
  req.num_queues = num_queues;
  req.queue_size = queue_size;
  ASSIGN_OR_RETURN(Message reply, send_with_reply(VHOST_USER_GET_INFLIGHT_FD, bytes_of(req)));
  // What that many split queues need, plus a page of slack for a back-end's rounding.
  const uint64_t max = uint64_t{num_queues} * inflight_queue_region_bytes(queue_size) + 4096;
  return parsed(VHOST_USER_GET_INFLIGHT_FD, parse_inflight_reply(std::move(reply), max));
}

Result<void> FrontendClient::set_inflight_fd(const VhostUserInflight& info, int fd) {
  int fds[1] = {fd};
  return send_no_reply(VHOST_USER_SET_INFLIGHT_FD, bytes_of(info), fds);
}

Result<void> FrontendClient::set_vring_num(uint32_t index, uint32_t num) {
  return send_no_reply(VHOST_USER_SET_VRING_NUM, bytes_of(VhostVringState{index, num}), {});
}

Result<void> FrontendClient::set_vring_addr(const VhostVringAddr& addr) {
  return send_no_reply(VHOST_USER_SET_VRING_ADDR, bytes_of(addr), {});
}

Result<void> FrontendClient::set_vring_base(uint32_t index, uint32_t base) {
  return send_no_reply(VHOST_USER_SET_VRING_BASE, bytes_of(VhostVringState{index, base}), {});
}

Result<uint32_t> FrontendClient::get_vring_base(uint32_t index) {
  ASSIGN_OR_RETURN(Message reply, send_with_reply(VHOST_USER_GET_VRING_BASE,
                                                  bytes_of(VhostVringState{index, 0})));
  return parsed(VHOST_USER_GET_VRING_BASE, parse_vring_base_reply(reply, index));
}

Result<void> FrontendClient::set_vring_fd(uint32_t request, uint32_t index, int fd) {
  if (index > VHOST_USER_VRING_IDX_MASK)
    return fail("vhost-user " + path_,
                short_request_name(request) + ": vring " + std::to_string(index) + " > 255");
  uint64_t v = index | (fd < 0 ? VHOST_USER_VRING_NOFD_MASK : 0);
  int fds[1] = {fd};
  return send_no_reply(request, bytes_of(v), fd < 0 ? std::span<const int>{} : fds);
}

Result<void> FrontendClient::set_vring_kick(uint32_t index, int fd) {
  return set_vring_fd(VHOST_USER_SET_VRING_KICK, index, fd);
}

Result<void> FrontendClient::set_vring_call(uint32_t index, int fd) {
  return set_vring_fd(VHOST_USER_SET_VRING_CALL, index, fd);
}

Result<void> FrontendClient::set_vring_enable(uint32_t index, bool enable) {
  return send_no_reply(VHOST_USER_SET_VRING_ENABLE,
                       bytes_of(VhostVringState{index, enable ? 1u : 0u}), {});
}

Result<void> FrontendClient::reset_device() {
  return send_no_reply(has_protocol_feature(VHOST_USER_PROTOCOL_F_RESET_DEVICE)
                           ? VHOST_USER_RESET_DEVICE
                           : VHOST_USER_RESET_OWNER,
                       {}, {});
}

}  // namespace tern::vhost_user
