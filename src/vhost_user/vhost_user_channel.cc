#include "vhost_user/vhost_user_channel.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <cerrno>
#include <cstring>

#include "vhost_user/vhost_user_internal.h"

namespace tern::vhost_user {

namespace {

using Clock = std::chrono::steady_clock;

Result<sockaddr_un> unix_address(const std::string& path, const char* op) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.empty()) return fail(op, "empty socket path");
  if (path.size() >= sizeof a.sun_path)
    return fail(op, path + ": socket path longer than " + std::to_string(sizeof a.sun_path - 1) +
                        " bytes");
  std::memcpy(a.sun_path, path.data(), path.size());
  return a;
}

/// Closes every fd in a received SCM_RIGHTS control buffer that `out` has not taken.
void collect_fds(msghdr& mh, std::vector<UniqueFd>& out) {
  for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c != nullptr; c = CMSG_NXTHDR(&mh, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < n; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      out.emplace_back(fd);  // owned at once: closed with `out` if the message is refused
    }
  }
}

/// Waits until `fd` is readable or `deadline` passes; `forever` ignores the deadline.
Result<void> wait_readable(int fd, Clock::time_point deadline, bool forever,
                           std::chrono::milliseconds timeout, bool first_byte) {
  for (;;) {
    int ms = -1;
    if (!forever) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
      ms = left.count() < 0 ? 0 : static_cast<int>(std::min<int64_t>(left.count(), INT32_MAX));
    }
    pollfd p{fd, POLLIN, 0};
    int r = ::poll(&p, 1, ms);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return fail_errno("vhost-user", "poll");
    if (r > 0) return {};
    return fail_code(ETIMEDOUT, "vhost-user",
                     std::string(first_byte ? "no message" : "rest of the message not sent") +
                         " in " + std::to_string(timeout.count()) + " ms");
  }
}

/// Waits until `fd` can take more bytes, at most `timeout`.
Result<void> wait_writable(int fd, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    int ms = left.count() < 0 ? 0 : static_cast<int>(std::min<int64_t>(left.count(), INT32_MAX));
    pollfd p{fd, POLLOUT, 0};
    int r = ::poll(&p, 1, ms);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return fail_errno("vhost-user", "poll");
    if (r > 0) return {};
    return fail_code(ETIMEDOUT, "vhost-user",
                     "peer took no bytes for " + std::to_string(timeout.count()) + " ms");
  }
}

}  // namespace

Result<Channel> Channel::connect(const std::string& path) {
  ASSIGN_OR_RETURN(sockaddr_un addr, unix_address(path, "vhost-user connect"));
  // Non-blocking: a blocking connect to a listener whose backlog is full (a peer that never
  // accepts) waits forever, and callers hold the device's lock while they connect.
  UniqueFd s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!s.valid()) return fail_errno("vhost-user connect", "socket");
  if (retry_eintr([&] {
        return ::connect(s.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
      }) < 0) {
    if (errno == EAGAIN)
      return fail_code(EAGAIN, "vhost-user connect",
                       path + ": the back-end accepts no connection (its backlog is full)");
    return fail_errno("vhost-user connect", path);
  }
  // Every read and write polls with its own timeout (MSG_DONTWAIT); keep the blocking mode the
  // socket had before.
  int fl = ::fcntl(s.get(), F_GETFL);
  if (fl < 0 || ::fcntl(s.get(), F_SETFL, fl & ~O_NONBLOCK) < 0)
    return fail_errno("vhost-user connect", "fcntl");
  return Channel(std::move(s));
}

Result<void> Channel::send(const Message& msg, std::span<const int> fds) {
  if (msg.hdr.size != msg.payload.size() || msg.payload.size() > kMaxPayload)
    return fail("vhost-user", "send: payload of " + std::to_string(msg.payload.size()) +
                                  " bytes (header says " + std::to_string(msg.hdr.size) + ")");
  if (fds.size() > kMaxFds)
    return fail("vhost-user", "send: " + std::to_string(fds.size()) + " fds, at most " +
                                  std::to_string(kMaxFds));
  std::vector<uint8_t> bytes(sizeof msg.hdr + msg.payload.size());
  std::memcpy(bytes.data(), &msg.hdr, sizeof msg.hdr);
  if (!msg.payload.empty())
    std::memcpy(bytes.data() + sizeof msg.hdr, msg.payload.data(), msg.payload.size());

  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)] = {};
  size_t done = 0;
  while (done < bytes.size()) {
    iovec iov{bytes.data() + done, bytes.size() - done};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    if (done == 0 && !fds.empty()) {  // the fds travel with the first byte
      mh.msg_control = control;
      mh.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
      cmsghdr* c = CMSG_FIRSTHDR(&mh);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
      std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    ssize_t n = retry_eintr([&] { return ::sendmsg(sock_.get(), &mh, MSG_NOSIGNAL | MSG_DONTWAIT); });
    if (n < 0 && errno == EAGAIN) {  // a peer that does not read: wait, bounded
      TRY(wait_writable(sock_.get(), send_timeout_));
      continue;
    }
    if (n < 0) {
      if (errno == EPIPE || errno == ECONNRESET)
        return fail_code(errno, "vhost-user", "peer closed the connection");
      return fail_errno("vhost-user", "sendmsg");
    }
    done += static_cast<size_t>(n);
  }
  return {};
}

Result<Message> Channel::recv(std::chrono::milliseconds timeout) {
  const bool forever = timeout.count() < 0;
  Message m;
  auto deadline = Clock::now() + timeout;
  // One buffer for the header, then one for the payload, every read through recvmsg so fds are
  // collected (and closed if refused) wherever a peer attaches them. The control buffer has room
  // for one more fd than allowed, so "too many" is seen even without MSG_CTRUNC.
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * (kMaxFds + 1))];
  auto read_into = [&](uint8_t* buf, size_t len, bool header) -> Result<void> {
    size_t got = 0;
    while (got < len) {
      TRY(wait_readable(sock_.get(), deadline, forever, timeout, header && got == 0));
      iovec iov{buf + got, len - got};
      msghdr mh{};
      mh.msg_iov = &iov;
      mh.msg_iovlen = 1;
      mh.msg_control = control;
      mh.msg_controllen = sizeof control;
      ssize_t n = ::recvmsg(sock_.get(), &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n < 0) {
        if (errno == ECONNRESET) return fail_code(errno, "vhost-user", "peer closed the connection");
        return fail_errno("vhost-user", "recvmsg");
      }
      collect_fds(mh, m.fds);
      if (mh.msg_flags & MSG_CTRUNC)
        return fail("vhost-user", "message with more than " + std::to_string(kMaxFds) +
                                      " fds (closed)");
      if (m.fds.size() > kMaxFds)
        return fail("vhost-user", "message with " + std::to_string(m.fds.size()) +
                                      " fds, at most " + std::to_string(kMaxFds) + " (closed)");
      if (n == 0) {
        if (header && got == 0) return fail("vhost-user", "peer closed the connection");
        return fail("vhost-user", "peer closed the connection in the middle of a message");
      }
      got += static_cast<size_t>(n);
      // The rest of a message may take as long again as its first byte did.
      if (header && got == static_cast<size_t>(n) && !forever) deadline = Clock::now() + timeout;
    }
    return {};
  };
  TRY(read_into(reinterpret_cast<uint8_t*>(&m.hdr), sizeof m.hdr, true));
  if (m.hdr.size > kMaxPayload)
    return fail("vhost-user", "message of " + std::to_string(m.hdr.size) + " payload bytes (" +
                                  short_request_name(m.hdr.request) + "), at most " +
                                  std::to_string(kMaxPayload));
  m.payload.resize(m.hdr.size);
  if (m.hdr.size > 0) TRY(read_into(m.payload.data(), m.payload.size(), false));
  return m;
}

Result<Listener> Listener::listen(const std::string& path) {
  ASSIGN_OR_RETURN(sockaddr_un addr, unix_address(path, "vhost-user listen"));
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode))
      return fail("vhost-user listen", path + ": exists and is not a socket (not replaced)");
    // A socket file: in use if something still accepts on it, else left by a dead process.
    UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!probe.valid()) return fail_errno("vhost-user listen", "socket");
    if (retry_eintr([&] {
          return ::connect(probe.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
        }) == 0)
      return fail("vhost-user listen", path + ": another process is listening there");
    if (errno != ECONNREFUSED)  // e.g. EAGAIN: a live listener's full backlog
      return fail_errno("vhost-user listen", path + ": cannot tell whether the socket is stale");
    if (::unlink(path.c_str()) < 0 && errno != ENOENT)
      return fail_errno("vhost-user listen", "unlink stale socket " + path);
  } else if (errno != ENOENT) {
    return fail_errno("vhost-user listen", path);
  }
  UniqueFd s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) return fail_errno("vhost-user listen", "socket");
  if (::bind(s.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) < 0)
    return fail_errno("vhost-user listen", "bind " + path);
  ASSIGN_OR_RETURN(auto bound, BoundSocketPath::after_bind(path, "vhost-user listen"));
  if (::listen(s.get(), 1) < 0) {
    int e = errno;
    bound.remove();
    return fail_code(e, "vhost-user listen", path);
  }
  return Listener(std::move(s), std::move(bound));
}

Listener::~Listener() {
  if (sock_.valid()) bound_.remove();
}

Result<Channel> Listener::accept() {
  int fd = retry_eintr([&] { return ::accept4(sock_.get(), nullptr, nullptr, SOCK_CLOEXEC); });
  if (fd < 0) return fail_errno("vhost-user accept", bound_.path());
  return Channel(UniqueFd(fd));
}

}  // namespace tern::vhost_user
