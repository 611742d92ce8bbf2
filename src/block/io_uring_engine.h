// IoUringEngine: IoEngine over liburing. Ops are prepared into the submission queue and submitted
// in one io_uring_submit() per batch; completions raise an eventfd registered with the ring.
//
// Bounded and always progressing, whatever the worker asks for:
//  - at most `depth` * 2 ops (the completion ring's size) are in the kernel at once; further ops
//    wait in a backlog in order, so a request with many segments (one DISCARD of max_discard_seg
//    ranges per slot) never overflows the rings into spurious errors;
//  - io_uring_submit() failing (-EAGAIN, -EBUSY, ...) with nothing of ours in the kernel — so no
//    completion would ever wake the worker — raises the eventfd itself so the worker retries
//    after reaping; after kMaxSubmitRetries such failures in a row the unsubmitted ops complete
//    with the error (their SQEs become NOPs whose completions are dropped), so drain, reset,
//    quiesce and exit never wait forever.
#pragma once

#include <liburing.h>

#include <deque>

#include "block/io_engine.h"

namespace tern {

class IoUringEngine final : public IoEngine {
 public:
  /// io_uring_submit()'s shape; tests inject failures through it.
  using SubmitFn = int (*)(io_uring*);
  /// Consecutive failed submits (with nothing in the kernel) before queued ops are failed.
  static constexpr unsigned kMaxSubmitRetries = 64;

  /// Sets up a ring of `depth` entries (rounded up by the kernel) for `fd`.
  [[nodiscard]] static Result<std::unique_ptr<IoUringEngine>> create(BorrowedFd fd, unsigned depth,
                                                                     SubmitFn submit = nullptr);
  ~IoUringEngine() override;

  [[nodiscard]] std::string_view name() const override { return "io_uring"; }
  void enqueue(const IoOp& op) override;
  void submit() override;
  [[nodiscard]] BorrowedFd completion_fd() const override { return event_.borrow(); }
  void reap(std::vector<IoCompletion>& out) override;
  [[nodiscard]] size_t in_flight() const override {
    return in_ring_ - abandoned_ + backlog_.size() + failed_.size();
  }
  /// Ops waiting in the backlog for room in the kernel (for tests).
  [[nodiscard]] size_t backlog() const { return backlog_.size(); }

 private:
  IoUringEngine() = default;
  void prep(io_uring_sqe* sqe, const IoOp& op);
  /// Moves backlog ops into free SQEs while the kernel has room; submits a full SQ on the way.
  void fill();
  void do_submit();
  /// Fails every op still in the SQ (not consumed by the kernel) with `err`.
  void abandon_unsubmitted(int err);
  void wake() const;

  io_uring ring_{};
  bool ring_ok_ = false;
  int fd_ = -1;
  SubmitFn submit_ = nullptr;
  UniqueFd event_;
  size_t cap_ = 0;        // most ops in the ring at once (CQ entries)
  size_t in_ring_ = 0;    // SQEs prepared and not yet reaped (abandoned NOPs included)
  size_t abandoned_ = 0;  // of in_ring_: NOPs standing in for failed ops
  unsigned submit_failures_ = 0;
  std::deque<IoOp> backlog_;
  std::vector<IoCompletion> failed_;  // ops that completed without reaching the kernel
};

}  // namespace tern
