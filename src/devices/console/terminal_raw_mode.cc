#include "devices/console/terminal_raw_mode.h"

#include <unistd.h>

#include <atomic>
#include <utility>

namespace tern {

namespace {
// The one active raw-mode terminal and its saved attributes: g_fd is -1 (none), -2 (being set
// up) or the fd. g_saved is written before the fd is published (release) and read after it is
// loaded (acquire), so a signal handler never sees a half-written termios.
std::atomic<int> g_fd{-1};
termios g_saved{};
}  // namespace

Result<TerminalRawMode> TerminalRawMode::enter(BorrowedFd fd, bool keep_signals) {
  if (!::isatty(fd.get())) return fail_errno("isatty", "console input");
  termios saved{};
  if (::tcgetattr(fd.get(), &saved) != 0) return fail_errno("tcgetattr", "console input");
  // Claim the slot (-2: claimed, not yet published) before touching g_saved.
  int expected = -1;
  if (!g_fd.compare_exchange_strong(expected, -2, std::memory_order_acq_rel))
    return fail("terminal raw mode", "already active on another fd");
  g_saved = saved;
  g_fd.store(fd.get(), std::memory_order_release);

  termios raw = saved;
  ::cfmakeraw(&raw);
  if (keep_signals) raw.c_lflag |= ISIG;
  raw.c_cc[VMIN] = 1;
  raw.c_cc[VTIME] = 0;
  if (::tcsetattr(fd.get(), TCSANOW, &raw) != 0) {
    auto err = fail_errno("tcsetattr", "console input");
    g_fd.store(-1, std::memory_order_release);
    return err;
  }
  return TerminalRawMode(fd.get());
}

TerminalRawMode::TerminalRawMode(TerminalRawMode&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}

TerminalRawMode& TerminalRawMode::operator=(TerminalRawMode&& o) noexcept {
  if (this != &o) {
    restore();
    fd_ = std::exchange(o.fd_, -1);
  }
  return *this;
}

void TerminalRawMode::restore() {
  if (fd_ < 0) return;
  ::tcsetattr(fd_, TCSANOW, &g_saved);
  g_fd.store(-1, std::memory_order_release);
  fd_ = -1;
}

void restore_terminal_from_signal_handler() {
  int fd = g_fd.load(std::memory_order_acquire);
  if (fd >= 0) ::tcsetattr(fd, TCSANOW, &g_saved);
}

}  // namespace tern
