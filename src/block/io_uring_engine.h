// IoUringEngine: IoEngine over liburing. Ops are prepared into the submission queue and submitted
// in one io_uring_submit() per batch; completions raise an eventfd registered with the ring.
#pragma once

#include <liburing.h>

#include "block/io_engine.h"

namespace tern {

class IoUringEngine final : public IoEngine {
 public:
  /// Sets up a ring of `depth` entries (rounded up by the kernel) for `fd`.
  [[nodiscard]] static Result<std::unique_ptr<IoUringEngine>> create(BorrowedFd fd, unsigned depth);
  ~IoUringEngine() override;

  [[nodiscard]] std::string_view name() const override { return "io_uring"; }
  void enqueue(const IoOp& op) override;
  void submit() override;
  [[nodiscard]] BorrowedFd completion_fd() const override { return event_.borrow(); }
  void reap(std::vector<IoCompletion>& out) override;
  [[nodiscard]] size_t in_flight() const override { return in_flight_; }

 private:
  IoUringEngine() = default;
  io_uring ring_{};
  bool ring_ok_ = false;
  int fd_ = -1;
  UniqueFd event_;
  size_t in_flight_ = 0;
  std::vector<IoCompletion> failed_;  // ops that could not even be submitted
};

}  // namespace tern
