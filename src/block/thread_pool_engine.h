// ThreadPoolEngine: IoEngine that runs each op synchronously (preadv/pwritev/fdatasync/fallocate)
// on one of a few helper threads; used when io_uring is unavailable or engine=threads was asked.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "block/io_engine.h"

namespace tern {

class ThreadPoolEngine final : public IoEngine {
 public:
  /// Starts `threads` helpers (>= 1) for `fd`.
  [[nodiscard]] static Result<std::unique_ptr<ThreadPoolEngine>> create(BorrowedFd fd,
                                                                       unsigned threads);
  /// Finishes every submitted op, then joins the helpers.
  ~ThreadPoolEngine() override;

  [[nodiscard]] std::string_view name() const override { return "threads"; }
  void enqueue(const IoOp& op) override;
  void submit() override;
  [[nodiscard]] BorrowedFd completion_fd() const override { return event_.borrow(); }
  void reap(std::vector<IoCompletion>& out) override;
  [[nodiscard]] size_t in_flight() const override { return in_flight_; }

 private:
  ThreadPoolEngine() = default;
  void run();
  [[nodiscard]] int64_t execute(const IoOp& op) const;

  int fd_ = -1;
  UniqueFd event_;
  size_t in_flight_ = 0;        // worker-thread only
  std::vector<IoOp> pending_;   // worker-thread only: enqueued, not submitted
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<IoOp> queue_;      // guarded by mu_
  std::vector<IoCompletion> done_;  // guarded by mu_
  bool stopping_ = false;       // guarded by mu_
  std::vector<std::thread> threads_;
};

}  // namespace tern
