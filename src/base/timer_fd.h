// TimerFd: a CLOCK_MONOTONIC timerfd(2), for workers that wait in epoll for a deadline (rate
// limiters) instead of sleeping.
#pragma once

#include <cstdint>

#include "base/fd.h"
#include "base/result.h"

namespace tern {

/// A non-blocking one-shot timerfd. Readable once the armed deadline passed.
class TimerFd {
 public:
  /// timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC).
  [[nodiscard]] static Result<TimerFd> create();

  /// Fires once, `ns` nanoseconds from now (0 is rounded up to 1 ns: a zero value would disarm).
  [[nodiscard]] Result<void> arm(uint64_t ns);
  /// Stops a pending expiry.
  [[nodiscard]] Result<void> disarm();
  /// Reads (clears) the expiry count; 0 if it had not fired (EAGAIN).
  uint64_t consume();

  [[nodiscard]] BorrowedFd fd() const { return fd_.borrow(); }

 private:
  explicit TimerFd(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
};

}  // namespace tern
