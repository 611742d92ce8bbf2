// UniqueFd: a move-only owner of a file descriptor; BorrowedFd: a non-owning view for parameters.
// Modelled on Android libbase unique_fd: close() is never retried on EINTR, errno is preserved.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <string>
#include <utility>

#include "base/result.h"

namespace tern {

/// Non-owning file descriptor, for function parameters.
class BorrowedFd {
 public:
  constexpr explicit BorrowedFd(int fd) : fd_(fd) {}
  [[nodiscard]] constexpr int get() const { return fd_; }

 private:
  int fd_;
};

/// Owns one file descriptor and closes it on destruction. -1 means empty.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  [[nodiscard]] int get() const { return fd_; }
  [[nodiscard]] bool valid() const { return fd_ >= 0; }
  [[nodiscard]] BorrowedFd borrow() const { return BorrowedFd(fd_); }
  bool operator!() const = delete;

  /// Gives up ownership without closing.
  int release() { return std::exchange(fd_, -1); }

  /// Closes the current fd (if any, errno preserved) and takes `fd`.
  void reset(int fd = -1) {
    if (fd_ >= 0) {
      int saved = errno;
      ::close(fd_);
      errno = saved;
    }
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

/// Retries `f()` while it fails with EINTR; returns its last result.
template <class F>
auto retry_eintr(F&& f) {
  decltype(f()) r;
  do {
    r = f();
  } while (r == -1 && errno == EINTR);
  return r;
}

/// open(2) returning an owned fd; the error names the path.
[[nodiscard]] Result<UniqueFd> open_file(const std::string& path, int flags, int mode = 0);

/// Reads the whole file at `path` (regular files; limit in bytes guards against huge inputs).
[[nodiscard]] Result<std::string> read_file(const std::string& path, size_t limit);

/// eventfd(2) with EFD_CLOEXEC | flags.
[[nodiscard]] Result<UniqueFd> make_eventfd(unsigned initval, int flags);

}  // namespace tern
