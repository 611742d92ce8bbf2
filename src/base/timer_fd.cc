#include "base/timer_fd.h"

#include <sys/timerfd.h>

namespace tern {

Result<TimerFd> TimerFd::create() {
  int fd = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (fd < 0) return fail_errno("timerfd_create");
  return TimerFd(UniqueFd(fd));
}

Result<void> TimerFd::arm(uint64_t ns) {
  if (ns == 0) ns = 1;
  itimerspec its{};
  its.it_value.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
  its.it_value.tv_nsec = static_cast<long>(ns % 1'000'000'000);
  if (::timerfd_settime(fd_.get(), 0, &its, nullptr) != 0) return fail_errno("timerfd_settime");
  return {};
}

Result<void> TimerFd::disarm() {
  itimerspec its{};
  if (::timerfd_settime(fd_.get(), 0, &its, nullptr) != 0) return fail_errno("timerfd_settime");
  return {};
}

uint64_t TimerFd::consume() {
  uint64_t v = 0;
  if (retry_eintr([&] { return ::read(fd_.get(), &v, sizeof v); }) != sizeof v) return 0;
  return v;
}

}  // namespace tern
