// Building requests and replies, and the front-end's validation of the back-end's replies.
// parse_request() (the back-end's side) is in vhost_user_request.cc.
#include "vhost_user/vhost_user_message.h"

#include <cstdio>
#include <cstring>
#include <string_view>

#include "base/checked.h"
#include "vhost_user/vhost_user_internal.h"

namespace tern::vhost_user {

const char* request_name(uint32_t request) {
  switch (request) {
    case VHOST_USER_GET_FEATURES: return "VHOST_USER_GET_FEATURES";
    case VHOST_USER_SET_FEATURES: return "VHOST_USER_SET_FEATURES";
    case VHOST_USER_SET_OWNER: return "VHOST_USER_SET_OWNER";
    case VHOST_USER_RESET_OWNER: return "VHOST_USER_RESET_OWNER";
    case VHOST_USER_SET_MEM_TABLE: return "VHOST_USER_SET_MEM_TABLE";
    case VHOST_USER_SET_LOG_BASE: return "VHOST_USER_SET_LOG_BASE";
    case VHOST_USER_SET_LOG_FD: return "VHOST_USER_SET_LOG_FD";
    case VHOST_USER_SET_VRING_NUM: return "VHOST_USER_SET_VRING_NUM";
    case VHOST_USER_SET_VRING_ADDR: return "VHOST_USER_SET_VRING_ADDR";
    case VHOST_USER_SET_VRING_BASE: return "VHOST_USER_SET_VRING_BASE";
    case VHOST_USER_GET_VRING_BASE: return "VHOST_USER_GET_VRING_BASE";
    case VHOST_USER_SET_VRING_KICK: return "VHOST_USER_SET_VRING_KICK";
    case VHOST_USER_SET_VRING_CALL: return "VHOST_USER_SET_VRING_CALL";
    case VHOST_USER_SET_VRING_ERR: return "VHOST_USER_SET_VRING_ERR";
    case VHOST_USER_GET_PROTOCOL_FEATURES: return "VHOST_USER_GET_PROTOCOL_FEATURES";
    case VHOST_USER_SET_PROTOCOL_FEATURES: return "VHOST_USER_SET_PROTOCOL_FEATURES";
    case VHOST_USER_GET_QUEUE_NUM: return "VHOST_USER_GET_QUEUE_NUM";
    case VHOST_USER_SET_VRING_ENABLE: return "VHOST_USER_SET_VRING_ENABLE";
    case VHOST_USER_SEND_RARP: return "VHOST_USER_SEND_RARP";
    case VHOST_USER_NET_SET_MTU: return "VHOST_USER_NET_SET_MTU";
    case VHOST_USER_SET_BACKEND_REQ_FD: return "VHOST_USER_SET_BACKEND_REQ_FD";
    case VHOST_USER_IOTLB_MSG: return "VHOST_USER_IOTLB_MSG";
    case VHOST_USER_SET_VRING_ENDIAN: return "VHOST_USER_SET_VRING_ENDIAN";
    case VHOST_USER_GET_CONFIG: return "VHOST_USER_GET_CONFIG";
    case VHOST_USER_SET_CONFIG: return "VHOST_USER_SET_CONFIG";
    case VHOST_USER_GET_INFLIGHT_FD: return "VHOST_USER_GET_INFLIGHT_FD";
    case VHOST_USER_SET_INFLIGHT_FD: return "VHOST_USER_SET_INFLIGHT_FD";
    case VHOST_USER_RESET_DEVICE: return "VHOST_USER_RESET_DEVICE";
    case VHOST_USER_GET_MAX_MEM_SLOTS: return "VHOST_USER_GET_MAX_MEM_SLOTS";
    case VHOST_USER_ADD_MEM_REG: return "VHOST_USER_ADD_MEM_REG";
    case VHOST_USER_REM_MEM_REG: return "VHOST_USER_REM_MEM_REG";
    case VHOST_USER_SET_STATUS: return "VHOST_USER_SET_STATUS";
    case VHOST_USER_GET_STATUS: return "VHOST_USER_GET_STATUS";
    default: {
      thread_local char unknown[24];
      std::snprintf(unknown, sizeof unknown, "request %u", request);
      return unknown;
    }
  }
}

std::string short_request_name(uint32_t request) {
  const char* n = request_name(request);
  constexpr std::string_view kPrefix = "VHOST_USER_";
  if (std::string_view(n).starts_with(kPrefix)) return n + kPrefix.size();
  return n;
}

Message make_request(uint32_t request, std::span<const uint8_t> body, bool need_reply) {
  Message m;
  m.hdr.request = request;
  m.hdr.flags = VHOST_USER_VERSION | (need_reply ? VHOST_USER_NEED_REPLY_MASK : 0);
  m.hdr.size = static_cast<uint32_t>(body.size());
  m.payload.assign(body.begin(), body.end());
  return m;
}

Message make_reply(uint32_t request, std::span<const uint8_t> body) {
  Message m = make_request(request, body, false);
  m.hdr.flags = VHOST_USER_VERSION | VHOST_USER_REPLY_MASK;
  return m;
}

namespace {

std::string reply_op(uint32_t request) {
  return "vhost-user " + short_request_name(request) + " reply";
}

}  // namespace

Result<void> check_reply_header(const Message& reply, uint32_t request, size_t expected_size,
                                size_t expected_fds) {
  const auto& h = reply.hdr;
  if ((h.flags & VHOST_USER_VERSION_MASK) != VHOST_USER_VERSION)
    return fail(reply_op(request), "version " + std::to_string(h.flags & VHOST_USER_VERSION_MASK) +
                                       ", expected 1");
  if (!(h.flags & VHOST_USER_REPLY_MASK)) return fail(reply_op(request), "REPLY flag not set");
  if (h.request != request)
    return fail(reply_op(request), "reply to " + short_request_name(h.request));
  if (h.size != reply.payload.size())
    return fail(reply_op(request), "header size " + std::to_string(h.size) + " but " +
                                       std::to_string(reply.payload.size()) + " payload bytes");
  if (h.size != expected_size)
    return fail(reply_op(request), "size " + std::to_string(h.size) + ", expected " +
                                       std::to_string(expected_size));
  if (reply.fds.size() != expected_fds)
    return fail(reply_op(request), std::to_string(reply.fds.size()) + " fds, expected " +
                                       std::to_string(expected_fds));
  return {};
}

Result<uint64_t> parse_u64_reply(const Message& reply, uint32_t request) {
  TRY(check_reply_header(reply, request, sizeof(uint64_t), 0));
  uint64_t v;
  std::memcpy(&v, reply.payload.data(), sizeof v);
  return v;
}

Result<void> parse_ack_reply(const Message& reply, uint32_t request) {
  ASSIGN_OR_RETURN(uint64_t status, parse_u64_reply(reply, request));
  if (status != 0)
    return fail(reply_op(request),
                "the back-end failed the request (status " + std::to_string(status) + ")");
  return {};
}

Result<uint32_t> parse_vring_base_reply(const Message& reply, uint32_t index) {
  TRY(check_reply_header(reply, VHOST_USER_GET_VRING_BASE, sizeof(VhostVringState), 0));
  VhostVringState s;
  std::memcpy(&s, reply.payload.data(), sizeof s);
  if (s.index != index)
    return fail(reply_op(VHOST_USER_GET_VRING_BASE),
                "vring " + std::to_string(s.index) + ", expected " + std::to_string(index));
  return s.num;
}

Result<std::vector<uint8_t>> parse_config_reply(const Message& reply, uint32_t size) {
  if (size > VHOST_USER_MAX_CONFIG_SIZE)
    return fail(reply_op(VHOST_USER_GET_CONFIG), "asked for " + std::to_string(size) +
                                                     " bytes, more than 256");
  TRY(check_reply_header(reply, VHOST_USER_GET_CONFIG, sizeof(VhostUserConfigHeader) + size, 0));
  VhostUserConfigHeader h;
  std::memcpy(&h, reply.payload.data(), sizeof h);
  if (h.offset != 0)
    return fail(reply_op(VHOST_USER_GET_CONFIG),
                "offset " + std::to_string(h.offset) + ", expected 0");
  if (h.size != size)
    return fail(reply_op(VHOST_USER_GET_CONFIG),
                "config size " + std::to_string(h.size) + ", expected " + std::to_string(size));
  auto first = reply.payload.begin() + sizeof h;
  return std::vector<uint8_t>(first, first + size);
}

Result<InflightReply> parse_inflight_reply(Message reply, uint64_t max_size) {
  TRY(check_reply_header(reply, VHOST_USER_GET_INFLIGHT_FD, sizeof(VhostUserInflight), 1));
  InflightReply r;
  std::memcpy(&r.info, reply.payload.data(), sizeof r.info);
  const std::string op = reply_op(VHOST_USER_GET_INFLIGHT_FD);
  if (r.info.mmap_size == 0) return fail(op, "mmap_size 0");
  if (r.info.mmap_size > max_size)
    return fail(op, "mmap_size " + std::to_string(r.info.mmap_size) + ", more than the " +
                        std::to_string(max_size) + " bytes the queues need");
  if (r.info.mmap_offset % 4096 != 0)
    return fail(op, "mmap_offset " + std::to_string(r.info.mmap_offset) + " not page-aligned");
  if (!checked_add(r.info.mmap_offset, r.info.mmap_size) ||
      *checked_add(r.info.mmap_offset, r.info.mmap_size) > uint64_t{INT64_MAX})
    return fail(op, "mmap_offset + mmap_size overflows");
  if (!reply.fds[0].valid()) return fail(op, "invalid fd");
  r.fd = std::move(reply.fds[0]);
  return r;
}

}  // namespace tern::vhost_user
