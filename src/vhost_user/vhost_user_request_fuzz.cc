// libFuzzer target: the front-end's requests as tern's back-end parses them (parse_request).
// Input: u8 flags. Bit 7 clear: one Message (bits 0..3: fds attached, mod 9; bit 4: hdr.size as
// in the input, else the payload's length), then the 12-byte header, then the payload (at most
// kMaxPayload bytes). Bit 7 set: the rest is a byte stream written into a socketpair (bits 0..3:
// fds sent with it, mod 12, so more than kMaxFds too) and the back-end's Channel reads messages
// from it until an error, parsing each. Nothing may crash or hang, and every accepted Request
// must hold what parse_request promises (its fds match its body, its regions are sane).
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "base/testing/fuzz_input.h"
#include "vhost_user/vhost_user_channel.h"
#include "vhost_user/vhost_user_message.h"

namespace {

using namespace tern;
using namespace tern::vhost_user;

void check_region(const VhostUserMemoryRegion& r) {
  FUZZ_CHECK(r.memory_size != 0);
  FUZZ_CHECK(r.guest_phys_addr + r.memory_size > r.guest_phys_addr);
  FUZZ_CHECK(r.userspace_addr + r.memory_size > r.userspace_addr);
  FUZZ_CHECK(r.mmap_offset + r.memory_size > r.mmap_offset);
}

void parse_and_check(Message m) {
  const uint32_t code = m.hdr.request;
  const bool need_reply = m.hdr.flags & VHOST_USER_NEED_REPLY_MASK;
  auto r = parse_request(std::move(m));
  if (!r) return;
  FUZZ_CHECK(r->request == code && r->need_reply == need_reply);
  FUZZ_CHECK(r->fds.size() <= kMaxFds);
  for (const auto& fd : r->fds) FUZZ_CHECK(fd.valid());
  if (std::holds_alternative<NoBody>(r->body) || std::holds_alternative<uint64_t>(r->body) ||
      std::holds_alternative<VhostVringState>(r->body) ||
      std::holds_alternative<VhostVringAddr>(r->body) ||
      std::holds_alternative<ConfigRequest>(r->body))
    FUZZ_CHECK(r->fds.empty());
  if (auto* t = std::get_if<MemTable>(&r->body)) {
    FUZZ_CHECK(!t->regions.empty() && t->regions.size() <= VHOST_MEMORY_BASELINE_NREGIONS);
    FUZZ_CHECK(t->regions.size() == r->fds.size());
    for (const auto& reg : t->regions) check_region(reg);
  }
  if (auto* reg = std::get_if<VhostUserMemRegMsg>(&r->body)) {
    check_region(reg->region);
    FUZZ_CHECK(r->fds.size() == (code == VHOST_USER_ADD_MEM_REG ? 1u : 0u));
  }
  if (auto* v = std::get_if<VringFd>(&r->body)) FUZZ_CHECK(r->fds.size() == (v->has_fd ? 1u : 0u));
  if (auto* c = std::get_if<ConfigRequest>(&r->body)) {
    FUZZ_CHECK(c->hdr.size <= VHOST_USER_MAX_CONFIG_SIZE);
    FUZZ_CHECK(c->data.size() == (code == VHOST_USER_SET_CONFIG ? c->hdr.size : 0u));
  }
  if (auto* i = std::get_if<VhostUserInflight>(&r->body)) {
    FUZZ_CHECK(i->num_queues != 0 && i->queue_size != 0);
    if (code == VHOST_USER_SET_INFLIGHT_FD)
      FUZZ_CHECK(r->fds.size() == 1 &&
                 i->mmap_size >= i->num_queues * inflight_queue_region_bytes(i->queue_size));
    else
      FUZZ_CHECK(r->fds.empty());
  }
}

void stream(uint8_t flags, std::span<const uint8_t> bytes) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return;
  UniqueFd front(sv[0]);
  Channel back{UniqueFd(sv[1])};
  if (bytes.size() > 64 * 1024) bytes = bytes.first(64 * 1024);  // fits the socket buffer
  std::vector<UniqueFd> owned;
  std::vector<int> fds;
  for (size_t i = 0; i < (flags & 0xf) % 12u; ++i) {
    owned.emplace_back(::eventfd(0, EFD_CLOEXEC));
    fds.push_back(owned.back().get());
  }
  if (!bytes.empty()) {
    iovec iov{const_cast<uint8_t*>(bytes.data()), bytes.size()};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    std::vector<char> control(CMSG_SPACE(sizeof(int) * fds.size()));
    if (!fds.empty()) {
      mh.msg_control = control.data();
      mh.msg_controllen = control.size();
      cmsghdr* c = CMSG_FIRSTHDR(&mh);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
      std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    if (::sendmsg(front.get(), &mh, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) return;
  }
  front.reset();  // EOF after the bytes: every recv ends, none waits
  for (int i = 0; i < 64; ++i) {
    auto m = back.recv(std::chrono::milliseconds(-1));
    if (!m) break;
    FUZZ_CHECK(m->payload.size() == m->hdr.size && m->payload.size() <= kMaxPayload);
    FUZZ_CHECK(m->fds.size() <= kMaxFds);
    parse_and_check(std::move(*m));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  testing::quiet_logs();
  testing::FuzzInput in(data, size);
  const uint8_t flags = in.u8();
  if (flags & 0x80) {
    stream(flags, in.rest());
    return 0;
  }
  Message m;
  m.hdr.request = in.u32();
  m.hdr.flags = in.u32();
  m.hdr.size = in.u32();
  auto payload = in.rest();
  if (payload.size() > kMaxPayload) payload = payload.first(kMaxPayload);
  m.payload.assign(payload.begin(), payload.end());
  if (!(flags & 0x10)) m.hdr.size = static_cast<uint32_t>(m.payload.size());
  for (size_t i = 0; i < (flags & 0xf) % (kMaxFds + 1); ++i)
    m.fds.emplace_back(::eventfd(0, EFD_CLOEXEC));
  parse_and_check(std::move(m));
  return 0;
}
