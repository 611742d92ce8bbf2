// libFuzzer target: a back-end's reply as tern's front-end parses it (vhost_user_message.h). Input:
// u8 flags (bits 0..3: fds attached, mod 9; bit 4: hdr.size as in the input, else the payload's
// length), u32 what the front-end asked (the config size, the vring index, the inflight
// bound), then the 12-byte header, then the payload (at most kMaxPayload bytes). Every reply
// parser runs on the Message: nothing may crash, and whatever a parser accepts must be what it
// promises (the exact size, the REPLY flag, the request code, the bounds).
#include <sys/eventfd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "base/testing/fuzz_input.h"
#include "vhost_user/vhost_user_message.h"

namespace {

using namespace tern;
using namespace tern::vhost_user;

Message build(const VhostUserHeader& hdr, std::span<const uint8_t> payload, size_t nfds,
              bool raw_size) {
  Message m;
  m.hdr = hdr;
  m.payload.assign(payload.begin(), payload.end());
  if (!raw_size) m.hdr.size = static_cast<uint32_t>(m.payload.size());
  for (size_t i = 0; i < nfds; ++i) m.fds.emplace_back(::eventfd(0, EFD_CLOEXEC));
  return m;
}

bool is_reply_to(const Message& m, uint32_t request) {
  return (m.hdr.flags & VHOST_USER_VERSION_MASK) == VHOST_USER_VERSION &&
         (m.hdr.flags & VHOST_USER_REPLY_MASK) && m.hdr.request == request &&
         m.hdr.size == m.payload.size();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  testing::quiet_logs();
  testing::FuzzInput in(data, size);
  const uint8_t flags = in.u8();
  const size_t nfds = (flags & 0xf) % (kMaxFds + 1);
  const bool raw_size = flags & 0x10;
  const uint32_t asked = in.u32();
  VhostUserHeader hdr;
  hdr.request = in.u32();
  hdr.flags = in.u32();
  hdr.size = in.u32();
  auto payload = in.rest();
  if (payload.size() > kMaxPayload) payload = payload.first(kMaxPayload);
  Message m = build(hdr, payload, nfds, raw_size);

  const uint32_t u64_requests[] = {VHOST_USER_GET_FEATURES, VHOST_USER_GET_PROTOCOL_FEATURES,
                                   VHOST_USER_GET_QUEUE_NUM, VHOST_USER_GET_MAX_MEM_SLOTS,
                                   m.hdr.request};
  for (uint32_t req : u64_requests) {
    if (auto v = parse_u64_reply(m, req)) {
      FUZZ_CHECK(is_reply_to(m, req) && m.payload.size() == 8 && m.fds.empty());
      uint64_t raw;
      std::memcpy(&raw, m.payload.data(), 8);
      FUZZ_CHECK(*v == raw);
    }
    if (parse_ack_reply(m, req)) {
      FUZZ_CHECK(is_reply_to(m, req) && m.payload.size() == 8);
      for (uint8_t b : m.payload) FUZZ_CHECK(b == 0);
    }
  }
  if (auto v = parse_vring_base_reply(m, asked)) {
    FUZZ_CHECK(is_reply_to(m, VHOST_USER_GET_VRING_BASE) && m.payload.size() == 8);
    VhostVringState s;
    std::memcpy(&s, m.payload.data(), sizeof s);
    FUZZ_CHECK(s.index == asked && s.num == *v);
  }
  for (uint32_t config_size : {asked, asked % (VHOST_USER_MAX_CONFIG_SIZE + 1)}) {
    if (auto c = parse_config_reply(m, config_size)) {
      FUZZ_CHECK(is_reply_to(m, VHOST_USER_GET_CONFIG));
      FUZZ_CHECK(config_size <= VHOST_USER_MAX_CONFIG_SIZE && c->size() == config_size);
      FUZZ_CHECK(m.payload.size() == sizeof(VhostUserConfigHeader) + config_size);
      if (config_size > 0)
        FUZZ_CHECK(std::memcmp(c->data(), m.payload.data() + sizeof(VhostUserConfigHeader),
                               config_size) == 0);
    }
  }
  const bool was_reply = is_reply_to(m, VHOST_USER_GET_INFLIGHT_FD);
  const size_t fds_before = m.fds.size();
  const size_t payload_size = m.payload.size();
  if (auto r = parse_inflight_reply(std::move(m), asked)) {
    FUZZ_CHECK(was_reply && payload_size == sizeof(VhostUserInflight) && fds_before == 1);
    FUZZ_CHECK(r->fd.valid());
    FUZZ_CHECK(r->info.mmap_size != 0 && r->info.mmap_size <= asked);
    FUZZ_CHECK(r->info.mmap_offset % 4096 == 0);
    FUZZ_CHECK(r->info.mmap_offset + r->info.mmap_size >= r->info.mmap_offset);
  }
  return 0;
}
