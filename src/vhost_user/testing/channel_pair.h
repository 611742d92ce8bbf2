// Test helpers: two connected Channels over a socketpair, and a raw sendmsg for messages a
// well-behaved Channel would refuse to send (oversized, too many fds).
#pragma once

#include <sys/socket.h>

#include <cstring>
#include <vector>

#include "vhost_user/vhost_user_channel.h"

namespace tern::vhost_user::testing {

struct ChannelPair {
  Channel a;  ///< the front-end's end in client tests
  Channel b;  ///< the back-end's end
};

/// A connected AF_UNIX stream pair (aborts the test binary if the kernel refuses one).
inline ChannelPair make_channel_pair() {
  int sv[2];
  TERN_CHECK(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
  return ChannelPair{Channel(UniqueFd(sv[0])), Channel(UniqueFd(sv[1]))};
}

/// Sends `len` bytes with `fds` as one SCM_RIGHTS message, no checks; true if all was sent.
inline bool send_raw(int sock, const void* data, size_t len, const std::vector<int>& fds) {
  iovec iov{const_cast<void*>(data), len};
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
  return ::sendmsg(sock, &mh, MSG_NOSIGNAL) == static_cast<ssize_t>(len);
}

}  // namespace tern::vhost_user::testing
