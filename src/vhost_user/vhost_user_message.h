// vhost-user messages as values: building the front-end's requests, and parsing untrusted bytes
// from the peer into validated values before anything acts on them (the back-end's replies in
// the front-end; the front-end's requests in tern's back-end). Every parser checks the version
// bits, the REPLY flag, the request code, the exact payload size for the request and the number
// of fds; anything else is an error naming the request ("vhost-user GET_CONFIG reply: size 8,
// expected 72"). Fuzzed by vhost_user_reply_fuzz.cc and vhost_user_request_fuzz.cc.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "base/fd.h"
#include "base/result.h"
#include "vhost_user/vhost_user_spec.h"

namespace tern::vhost_user {

/// One message as read from (or written to) the socket: header, payload (hdr.size bytes, at most
/// kMaxPayload) and the fds that came with it (owned; at most kMaxFds).
struct Message {
  VhostUserHeader hdr;
  std::vector<uint8_t> payload;
  std::vector<UniqueFd> fds;
};

/// A request from the front-end: version 1, NEED_REPLY when `need_reply`, `body`'s bytes.
[[nodiscard]] Message make_request(uint32_t request, std::span<const uint8_t> body,
                                   bool need_reply = false);
/// A request whose body is one wire struct (trivially copyable: a std::vector takes the span
/// overload above instead of sending its own bytes).
template <class T>
  requires std::is_trivially_copyable_v<T>
[[nodiscard]] Message make_request(uint32_t request, const T& body, bool need_reply = false) {
  return make_request(request,
                      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&body), sizeof body),
                      need_reply);
}
/// A reply from the back-end to `request`: version 1 | REPLY, `body`'s bytes.
[[nodiscard]] Message make_reply(uint32_t request, std::span<const uint8_t> body);

// ---- the front-end's parsing of replies (each takes the request it sent) ----

/// GET_FEATURES / GET_PROTOCOL_FEATURES / GET_QUEUE_NUM / GET_MAX_MEM_SLOTS: one u64, no fds.
[[nodiscard]] Result<uint64_t> parse_u64_reply(const Message& reply, uint32_t request);
/// A REPLY_ACK (u64 status; non-zero = the back-end failed the request: an error naming it).
[[nodiscard]] Result<void> parse_ack_reply(const Message& reply, uint32_t request);
/// GET_VRING_BASE: a VhostVringState for vring `index`; returns num (the next available index).
[[nodiscard]] Result<uint32_t> parse_vring_base_reply(const Message& reply, uint32_t index);
/// GET_CONFIG: offset 0 and exactly `size` bytes of config space (what was asked); returns them.
[[nodiscard]] Result<std::vector<uint8_t>> parse_config_reply(const Message& reply, uint32_t size);
/// GET_INFLIGHT_FD: a VhostUserInflight and exactly one fd; mmap_size non-zero and ≤ `max_size`
/// bytes, mmap_offset page-aligned, no overflow.
struct InflightReply {
  VhostUserInflight info;
  UniqueFd fd;
};
[[nodiscard]] Result<InflightReply> parse_inflight_reply(Message reply, uint64_t max_size);

// ---- the back-end's parsing of requests ----

/// SET_MEM_TABLE body: its regions (fds in Request::fds, one per region, same order).
struct MemTable {
  std::vector<VhostUserMemoryRegion> regions;
};
/// GET_CONFIG / SET_CONFIG body; `data` is SET_CONFIG's bytes (empty for GET_CONFIG).
struct ConfigRequest {
  VhostUserConfigHeader hdr;
  std::vector<uint8_t> data;
};
/// SET_VRING_KICK / CALL / ERR body: the vring index and whether an fd came (Request::fds[0]).
struct VringFd {
  uint8_t index = 0;
  bool has_fd = false;
};
/// No payload (SET_OWNER, RESET_OWNER, GET_FEATURES, ...).
struct NoBody {};

/// One front-end request, validated: a known request code, the exact payload size it takes, the
/// fds it takes (SET_MEM_TABLE: nregions ≤ 8 and one fd each; KICK/CALL: one unless NOFD), region
/// sizes non-zero and not overflowing. Unknown requests are an error (the back-end answers a
/// REPLY_ACK failure when asked, else ignores them).
/// Also checked: SET_MEM_TABLE regions 1..8, not overlapping (guest-physical or userspace);
/// mmap_offset + memory_size fits an off_t; REM_MEM_REG takes 0 or 1 fd (spec: SHOULD be none)
/// and any fd is closed, not returned; KICK/CALL/ERR no bits beyond index and NOFD; VRING_NUM
/// 1..32768; VRING_BASE ≤ 0xffff; VRING_ENABLE 0/1; VRING_ADDR flags ⊆ VHOST_VRING_F_LOG;
/// GET/SET_CONFIG size ≤ 256, flags 0/1, payload 12 + size (GET_CONFIG's zeroed bytes are not
/// kept); GET/SET_INFLIGHT_FD num_queues ≥ 1, queue_size 1..32768, SET's mmap_size covers the
/// queues and mmap_offset + mmap_size fits an off_t (the back-end still bounds num_queues by its
/// own queue count); SET_STATUS ≤ 0xff. SET_LOG_BASE/FD, SEND_RARP, NET_SET_MTU,
/// SET_BACKEND_REQ_FD, IOTLB_MSG, SET_VRING_ENDIAN are refused as not supported. On error every
/// fd that came is closed; the caller reads msg.hdr (request, NEED_REPLY) before moving it in.
struct Request {
  uint32_t request = 0;
  bool need_reply = false;
  std::variant<NoBody, uint64_t, VhostVringState, VhostVringAddr, MemTable, VhostUserMemRegMsg,
               ConfigRequest, VhostUserInflight, VringFd>
      body;
  std::vector<UniqueFd> fds;
};
[[nodiscard]] Result<Request> parse_request(Message msg);

}  // namespace tern::vhost_user
