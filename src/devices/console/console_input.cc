#include "devices/console/console_input.h"

#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "base/log.h"

namespace tern {

namespace {
constexpr size_t kReadChunk = 4096;
constexpr int kFullSinkPollMs = 10;  // how often to look for room while the sink is full
}  // namespace

Result<std::unique_ptr<ConsoleInput>> ConsoleInput::create(BorrowedFd in, InputSink& sink,
                                                           ConsoleInputOptions options) {
  struct stat st {};
  if (::fstat(in.get(), &st) != 0) return fail_errno("fstat", "console input");
  std::optional<TerminalRawMode> raw;
  if (options.raw_terminal && ::isatty(in.get())) {
    ASSIGN_OR_RETURN(TerminalRawMode mode, TerminalRawMode::enter(in, options.keep_signals));
    raw.emplace(std::move(mode));
  }
  ASSIGN_OR_RETURN(UniqueFd stop_fd, make_eventfd(0, 0));
  return std::unique_ptr<ConsoleInput>(
      new ConsoleInput(in, sink, std::move(stop_fd), std::move(raw)));
}

ConsoleInput::ConsoleInput(BorrowedFd in, InputSink& sink, UniqueFd stop_fd,
                           std::optional<TerminalRawMode> raw_mode)
    : in_fd_(in.get()), sink_(sink), stop_fd_(std::move(stop_fd)), raw_mode_(std::move(raw_mode)) {
  reader_ = std::thread([this] { run(); });
}

ConsoleInput::~ConsoleInput() {
  stop();
  if (raw_mode_) raw_mode_->restore();
}

void ConsoleInput::stop() {
  uint64_t one = 1;
  // An eventfd write of 1 cannot fail short of a counter overflow; ignore the result.
  [[maybe_unused]] ssize_t r = ::write(stop_fd_.get(), &one, sizeof(one));
  if (reader_.joinable()) reader_.join();
}

void ConsoleInput::run() {
  std::array<uint8_t, kReadChunk> buf;
  for (;;) {
    size_t space = sink_.input_space();
    std::array<pollfd, 2> fds{{{stop_fd_.get(), POLLIN, 0},
                               // A negative fd is ignored by poll(): don't read while full.
                               {space > 0 ? in_fd_ : -1, POLLIN, 0}}};
    int r = ::poll(fds.data(), fds.size(), space > 0 ? -1 : kFullSinkPollMs);
    if (r < 0) {
      if (errno == EINTR) continue;
      spdlog::warn("console input: poll: {}", std::strerror(errno));
      break;
    }
    if (fds[0].revents != 0) break;  // stop()
    if (fds[1].revents == 0) continue;
    if (fds[1].revents & POLLNVAL) {
      spdlog::warn("console input: fd {} is not open", in_fd_);
      break;
    }
    ssize_t n = ::read(in_fd_, buf.data(), std::min(space, buf.size()));
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      spdlog::warn("console input: read: {}", std::strerror(errno));
      break;
    }
    if (n == 0) {
      spdlog::debug("console input: end of file");
      break;
    }
    sink_.enqueue_input(std::span<const uint8_t>(buf.data(), static_cast<size_t>(n)));
    bytes_read_.fetch_add(static_cast<uint64_t>(n));
  }
  finished_.store(true);
}

}  // namespace tern
