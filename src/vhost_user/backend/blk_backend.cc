#include "vhost_user/backend/blk_backend.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <chrono>
#include <string>

#include <spdlog/spdlog.h>

#include "vhost_user/backend/backend_stats.h"
#include "vhost_user/backend/blk_session.h"
#include "vhost_user/backend/seccomp_filter.h"
#include "vhost_user/vhost_user_channel.h"

namespace tern::vhost_user {

namespace {
// How often the serving loop looks at `stop` while nothing arrives.
constexpr int kStopPollMs = 200;
// A message whose first byte arrived must be complete within this time.
constexpr std::chrono::milliseconds kMessageTimeout{5000};

std::atomic<bool> g_dump_stats{false};

void maybe_dump(const BackendStats& stats) {
  if (g_dump_stats.exchange(false, std::memory_order_relaxed))
    spdlog::info("vhost-user-blk: {}", stats.summary());
}

/// 1: readable; 0: `stop` was set; -1: poll failed (errno).
int wait_readable(int fd, const std::atomic<bool>& stop, const BackendStats& stats) {
  while (!stop.load(std::memory_order_relaxed)) {
    maybe_dump(stats);
    pollfd p{fd, POLLIN, 0};
    int n = ::poll(&p, 1, kStopPollMs);
    if (n < 0 && errno != EINTR) {
      spdlog::error("vhost-user-blk: poll: {}", std::strerror(errno));
      return -1;
    }
    if (n > 0) return 1;
  }
  return 0;
}

bool peer_closed(const Error& e) {
  return e.message().find("peer closed the connection") != std::string::npos &&
         e.message().find("middle of a message") == std::string::npos;
}

/// Serves one front-end until it disconnects, breaks the protocol or `stop` is set.
void serve(Channel& ch, const BlkDisk& disk, BackendStats& stats, RateLimit& log_limit,
           const std::atomic<bool>& stop) {
  BlkSession session(disk, stats, log_limit);
  for (;;) {
    int w = wait_readable(ch.fd().get(), stop, stats);
    if (w <= 0) return;
    auto msg = ch.recv(kMessageTimeout);
    if (!msg) {
      if (peer_closed(msg.error())) {
        spdlog::info("vhost-user-blk: the front-end disconnected");
      } else {
        BackendStats::add(stats.protocol_errors);
        TERN_LOG_RATELIMITED(log_limit, warn, "vhost-user-blk: {}; connection dropped",
                             msg.error().message());
      }
      return;
    }
    const uint32_t code = msg->hdr.request;
    const bool need_reply = (msg->hdr.flags & VHOST_USER_NEED_REPLY_MASK) != 0;
    std::optional<BlkSession::Reply> reply;
    if (!BlkSession::implements(code)) {
      reply = session.unsupported(code, need_reply);
    } else {
      auto req = parse_request(std::move(*msg));
      if (!req) {
        BackendStats::add(stats.protocol_errors);
        TERN_LOG_RATELIMITED(log_limit, warn, "vhost-user-blk: {}; connection dropped",
                             req.error().message());
        return;
      }
      auto r = session.handle(std::move(*req));
      if (!r) {
        BackendStats::add(stats.protocol_errors);
        TERN_LOG_RATELIMITED(log_limit, warn, "vhost-user-blk: {}; connection dropped",
                             r.error().message());
        return;
      }
      reply = std::move(*r);
    }
    if (!reply) continue;
    int fd = reply->fd;
    auto sent = fd >= 0 ? ch.send(reply->msg, std::span<const int>(&fd, 1)) : ch.send(reply->msg);
    if (!sent) {
      spdlog::info("vhost-user-blk: {}; connection dropped", sent.error().message());
      return;
    }
  }
}

/// The socket's directory, opened before the filter so the socket can be removed after it.
UniqueFd open_socket_dir(const std::string& path) {
  auto slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  return UniqueFd(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
}
}  // namespace

void request_blk_backend_stats() noexcept { g_dump_stats.store(true, std::memory_order_relaxed); }

Result<void> run_blk_backend(const BlkBackendOptions& options, const std::atomic<bool>& stop) {
  if (options.socket.empty()) return fail("--socket", "a path to listen at is required");
  ASSIGN_OR_RETURN(BlkDisk disk, BlkDisk::open(options.disk));
  auto listener = Listener::listen(options.socket);
  if (!listener) {
    Error e = listener.error();
    e.op = "--socket " + options.socket + ": " + e.op;
    return tl::unexpected<Error>(std::move(e));
  }
  UniqueFd dir = open_socket_dir(options.socket);
  std::string base = options.socket.substr(options.socket.rfind('/') + 1);
  if (options.seccomp) {
    TRY(install_backend_seccomp(dir.get()));
    spdlog::info("vhost-user-blk: seccomp filter installed");
  } else {
    spdlog::warn("vhost-user-blk: --seccomp off: the back-end is not confined");
  }
  spdlog::info("vhost-user-blk: serving {} ({} queue(s), {} sectors{}) at {}", disk.config.path,
               disk.config.queues, disk.image.capacity_sectors(),
               disk.image.read_only() ? ", read-only" : "", options.socket);

  BackendStats stats(disk.config.queues);
  RateLimit log_limit;
  while (wait_readable(listener->fd().get(), stop, stats) > 0) {
    auto ch = listener->accept();
    if (!ch) {
      TERN_LOG_RATELIMITED(log_limit, warn, "vhost-user-blk: accept: {}", ch.error().message());
      continue;
    }
    BackendStats::add(stats.connections);
    spdlog::info("vhost-user-blk: front-end connected");
    serve(*ch, disk, stats, log_limit, stop);  // the session's end drains and unmaps
  }
  if (options.stats_on_exit) spdlog::info("vhost-user-blk: stopped; {}", stats.summary());
  // The Listener's own unlink(path) is denied under the filter; remove it by its directory.
  if (dir.valid()) ::unlinkat(dir.get(), base.c_str(), 0);
  return {};
}

}  // namespace tern::vhost_user
