#include "devices/console/console_output.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

namespace tern {

namespace {
constexpr size_t kChunk = 4096;  // <= PIPE_BUF: a write after POLLOUT on a pipe does not block
constexpr int kPollMs = 50;      // how often a blocked writer checks for shutdown
}  // namespace

Result<std::unique_ptr<ConsoleOutput>> ConsoleOutput::create(const ConsoleTarget& target,
                                                             ConsoleOutputOptions options) {
  if (target.kind == ConsoleTarget::Kind::kStdio) {
    int fd = ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) return fail_errno("dup", "console stdout");
    return create_for_fd(UniqueFd(fd), options);
  }
  // O_NONBLOCK so that opening a FIFO without a reader fails (ENXIO) instead of hanging.
  ASSIGN_OR_RETURN(UniqueFd fd,
                   open_file(target.path, O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK, 0644));
  int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags < 0 || ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK) < 0)
    return fail_errno("fcntl", target.path);
  return create_for_fd(std::move(fd), options);
}

std::unique_ptr<ConsoleOutput> ConsoleOutput::create_for_fd(UniqueFd fd,
                                                            ConsoleOutputOptions options) {
  return std::unique_ptr<ConsoleOutput>(new ConsoleOutput(std::move(fd), options));
}

ConsoleOutput::ConsoleOutput(UniqueFd fd, ConsoleOutputOptions options)
    : fd_(std::move(fd)), options_(options), ring_(options.capacity) {
  writer_ = std::thread([this] { run(); });
}

ConsoleOutput::~ConsoleOutput() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    stop_deadline_ = std::chrono::steady_clock::now() + options_.shutdown_timeout;
  }
  work_cv_.notify_all();
  writer_.join();
}

void ConsoleOutput::write(std::span<const uint8_t> bytes) {
  if (bytes.empty()) return;
  bool wake = false;
  size_t dropped = 0;
  {
    std::lock_guard lock(mu_);
    size_t stored = 0;
    if (!stop_) {
      wake = ring_.empty();  // the writer only sleeps on an empty ring
      stored = ring_.push(bytes);
    }
    dropped = bytes.size() - stored;
    stats_.bytes_dropped += dropped;
    wake = wake && stored > 0;
  }
  if (wake) work_cv_.notify_one();
  if (dropped > 0)
    TERN_LOG_RATELIMITED(log_limit_, warn, "console output full: dropped {} bytes", dropped);
}

bool ConsoleOutput::flush(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  ++flush_waiters_;
  work_cv_.notify_one();  // a lingering writer writes at once
  bool drained =
      drained_cv_.wait_for(lock, timeout, [&] { return ring_.empty() && in_flight_ == 0; });
  --flush_waiters_;
  return drained;
}

ConsoleOutput::Stats ConsoleOutput::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

bool ConsoleOutput::shutdown_expired() const {
  std::lock_guard lock(mu_);
  return stop_ && std::chrono::steady_clock::now() >= stop_deadline_;
}

void ConsoleOutput::run() {
  // A write to a pipe whose reader is gone raises SIGPIPE in this thread; blocked, it stays
  // pending (and dies with the thread) and write() fails with EPIPE instead.
  sigset_t block;
  sigemptyset(&block);
  sigaddset(&block, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &block, nullptr);

  std::vector<uint8_t> chunk(kChunk);
  std::unique_lock lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [&] { return !ring_.empty() || stop_; });
    if (ring_.empty()) break;  // stopping, and everything has been written
    // Gather what follows the first byte (write() notifies only on an empty ring, so nothing
    // wakes this wait early but flush(), shutdown and the timeout; a full chunk is seen then).
    work_cv_.wait_for(lock, options_.linger,
                      [&] { return stop_ || flush_waiters_ > 0 || ring_.size() >= kChunk; });
    size_t n = ring_.pop(chunk);
    in_flight_ = n;
    lock.unlock();
    size_t written = write_all(std::span<const uint8_t>(chunk.data(), n));
    lock.lock();
    in_flight_ = 0;
    stats_.bytes_written += written;
    stats_.bytes_dropped += n - written;
    if (stop_ && std::chrono::steady_clock::now() >= stop_deadline_) {
      stats_.bytes_dropped += ring_.size();
      ring_.clear();
    }
    if (ring_.empty()) drained_cv_.notify_all();
  }
  drained_cv_.notify_all();
}

size_t ConsoleOutput::write_all(std::span<const uint8_t> data) {
  size_t done = 0;
  auto error = [&](const char* what, int err) {
    std::lock_guard lock(mu_);
    ++stats_.write_errors;
    TERN_LOG_RATELIMITED(log_limit_, warn, "console output: {}: {}", what, std::strerror(err));
  };
  while (done < data.size()) {
    if (shutdown_expired()) break;
    pollfd p{fd_.get(), POLLOUT, 0};
    int r = ::poll(&p, 1, kPollMs);
    if (r < 0) {
      if (errno == EINTR) continue;
      error("poll", errno);
      break;
    }
    if (r == 0) continue;
    if (!(p.revents & POLLOUT)) {  // POLLERR (reader gone), POLLHUP (hangup), POLLNVAL
      error("fd not writable", (p.revents & POLLNVAL) ? EBADF : EPIPE);
      break;
    }
    size_t len = std::min(data.size() - done, kChunk);
    ssize_t w = ::write(fd_.get(), data.data() + done, len);
    if (w < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      error("write", errno);
      break;
    }
    done += static_cast<size_t>(w);
    std::lock_guard lock(mu_);
    ++stats_.writes;
  }
  return done;
}

}  // namespace tern
