// Channel: one vhost-user connection, a Unix stream socket carrying Messages with SCM_RIGHTS fds
// (spec "Communication"). Listener: the back-end's listening socket.
//
// Reads are bounded: a header announcing more than kMaxPayload bytes or more than kMaxFds fds is a
// protocol error (extra fds are closed), so a peer cannot make tern allocate more. Every receive
// takes a timeout; a peer that closed the socket gives an error saying so ("vhost-user peer
// closed the connection"), EPIPE on send never raises SIGPIPE (MSG_NOSIGNAL), and a send to a peer
// that stopped reading fails after the send timeout.
#pragma once

#include <chrono>
#include <span>
#include <string>

#include "base/fd.h"
#include "base/socket_path.h"
#include "base/result.h"
#include "vhost_user/vhost_user_message.h"

namespace tern::vhost_user {

/// See the file comment. Not thread-safe: one user at a time.
class Channel {
 public:
  /// Connects to the back-end listening at `path` (AF_UNIX SOCK_STREAM, close-on-exec). Fails at
  /// once naming the path when nothing listens there (ENOENT, ECONNREFUSED).
  [[nodiscard]] static Result<Channel> connect(const std::string& path);
  /// Wraps a connected socket (accepted, or one end of a socketpair in tests).
  explicit Channel(UniqueFd socket) : sock_(std::move(socket)) {}

  /// Sends `msg`'s header and payload with `fds` (≤ kMaxFds) as SCM_RIGHTS; msg.fds is ignored.
  [[nodiscard]] Result<void> send(const Message& msg, std::span<const int> fds = {});
  /// Receives one message, waiting at most `timeout` (negative: forever) for its first byte
  /// (and as long again for the rest). Errors: timeout ("no message in 5000 ms"), peer closed,
  /// oversized payload, too many fds, a short message.
  [[nodiscard]] Result<Message> recv(std::chrono::milliseconds timeout);

  [[nodiscard]] BorrowedFd fd() const { return sock_.borrow(); }

  /// How long send() waits for a peer that stops reading (its socket buffer full) before it
  /// fails; 5000 ms unless set (FrontendClient sets its reply timeout).
  void set_send_timeout(std::chrono::milliseconds timeout) { send_timeout_ = timeout; }

 private:
  UniqueFd sock_;
  std::chrono::milliseconds send_timeout_{5000};
};

/// The back-end's listening socket at a path; the destructor unlinks the path.
class Listener {
 public:
  /// Binds and listens at `path` (a stale socket file left by a dead process is replaced; any
  /// other existing file is refused, naming it).
  [[nodiscard]] static Result<Listener> listen(const std::string& path);
  Listener(Listener&&) noexcept = default;
  Listener& operator=(Listener&&) noexcept = default;
  ~Listener();
  /// Accepts one connection (blocking).
  [[nodiscard]] Result<Channel> accept();
  [[nodiscard]] BorrowedFd fd() const { return sock_.borrow(); }
  [[nodiscard]] const std::string& path() const { return bound_.path(); }

 private:
  Listener(UniqueFd sock, BoundSocketPath bound) : sock_(std::move(sock)), bound_(std::move(bound)) {}
  UniqueFd sock_;
  /// Removed at the end only while the path still names this listener's socket file.
  BoundSocketPath bound_;
};

}  // namespace tern::vhost_user
