// BackendSession's monitor thread: watches the connection for the back-end's hang-up and, while
// the device is active, reconnects with a bounded backoff and replays the activation.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>

#include "vhost_user/frontend/backend_session.h"

namespace tern::vhost_user {

void BackendSession::wake() {
  uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof one);
}

void BackendSession::wait_wake(int timeout_ms) {
  pollfd p{wake_.get(), POLLIN, 0};
  (void)::poll(&p, 1, timeout_ms);
  uint64_t n;
  (void)!::read(wake_.get(), &n, sizeof n);
}

void BackendSession::monitor() {
  auto backoff = options_.reconnect_min;
  for (;;) {
    UniqueFd watch;
    uint64_t gen = 0;
    bool reconnect = false;
    {
      std::lock_guard lock(mu_);
      if (stop_) return;
      if (client_) {
        // A duplicate, so that the socket cannot be closed (and its number reused) under poll.
        watch = UniqueFd(::fcntl(client_->fd().get(), F_DUPFD_CLOEXEC, 0));
        gen = generation_;
      } else {
        reconnect = active_ && !active_->failed;
      }
    }
    if (watch.valid()) {
      // POLLRDHUP, not POLLIN: replies to the control thread's requests arrive on this socket,
      // and only the peer's close (EOF) or an error is the monitor's business.
      pollfd p[2] = {{watch.get(), POLLRDHUP, 0}, {wake_.get(), POLLIN, 0}};
      int n = ::poll(p, 2, -1);
      if (p[1].revents & POLLIN) wait_wake(0);
      if (n > 0 && (p[0].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))) {
        std::lock_guard lock(mu_);
        if (client_ && generation_ == gen) drop_locked("the back-end closed the connection", false);
      }
      backoff = options_.reconnect_min;
      continue;
    }
    if (!reconnect) {
      wait_wake(-1);  // until a connection or an activation appears, or stop
      continue;
    }
    wait_wake(static_cast<int>(backoff.count()));
    if (try_reconnect())
      backoff = options_.reconnect_min;
    else
      backoff = std::min(backoff * 2, options_.reconnect_max);
  }
}

bool BackendSession::try_reconnect() {
  std::lock_guard lock(mu_);
  if (stop_ || client_ || !active_ || active_->failed) return true;
  if (auto r = connect_locked(); !r) {
    if (!retry_logged_)
      TERN_LOG_RATELIMITED(log_limit_, warn, "{}: vhost-user reconnect to {}: {}; retrying", name_,
                           path_, r.error().message());
    retry_logged_ = true;
    return false;
  }
  if (auto r = replay_locked(/*first=*/false); !r) {
    if (active_->failed) return true;  // NEEDS_RESET set; nothing more to try
    drop_locked(r.error().message(), true);
    return false;
  }
  reconnects_.fetch_add(1, std::memory_order_relaxed);
  // Rate-limited, on its own budget (a logged "lost" line still gets its "reconnected"): a
  // back-end that hangs up after every replay is reconnected every reconnect_min for ever
  // (each counted in backend_reconnects).
  TERN_LOG_RATELIMITED(reconnected_log_limit_, info, "{}: vhost-user back-end {} reconnected{}",
                       name_, path_,
                       active_->paused ? " (queues start at resume)" : "; queues restarted");
  return true;
}

}  // namespace tern::vhost_user
