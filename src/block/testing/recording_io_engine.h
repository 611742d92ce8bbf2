// RecordingEngine: an IoEngine for unit tests that records the kind of every op it is given
// (fdatasync included) and forwards it to a real engine, so a test can assert that a flush was
// actually issued, and in which order. An optional hook runs as each op is given (before it is
// forwarded), so a test can change what the frontend sees while that op is in flight.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "block/io_engine.h"
#include "block/thread_pool_engine.h"

namespace tern::testing {

/// See the file comment. `log` and `mu` are shared with the test (the engine lives in a worker);
/// `on_enqueue` (may be empty) runs on the engine's thread, outside `mu`.
class RecordingEngine final : public IoEngine {
 public:
  RecordingEngine(std::unique_ptr<IoEngine> inner, std::shared_ptr<std::vector<IoOp::Kind>> log,
                  std::shared_ptr<std::mutex> mu, std::function<void(const IoOp&)> on_enqueue = {})
      : inner_(std::move(inner)),
        log_(std::move(log)),
        mu_(std::move(mu)),
        on_enqueue_(std::move(on_enqueue)) {}
  std::string_view name() const override { return "recording"; }
  void enqueue(const IoOp& op) override {
    {
      std::lock_guard lock(*mu_);
      log_->push_back(op.kind);
    }
    if (on_enqueue_) on_enqueue_(op);
    inner_->enqueue(op);
  }
  void submit() override { inner_->submit(); }
  BorrowedFd completion_fd() const override { return inner_->completion_fd(); }
  void reap(std::vector<IoCompletion>& out) override { inner_->reap(out); }
  size_t in_flight() const override { return inner_->in_flight(); }

 private:
  std::unique_ptr<IoEngine> inner_;
  std::shared_ptr<std::vector<IoOp::Kind>> log_;
  std::shared_ptr<std::mutex> mu_;
  std::function<void(const IoOp&)> on_enqueue_;
};

/// An IoEngineFactory of thread-pool engines wrapped in RecordingEngines sharing `log` and `mu`
/// (and `on_enqueue`).
inline IoEngineFactory recording_thread_pool_engines(
    std::shared_ptr<std::vector<IoOp::Kind>> log, std::shared_ptr<std::mutex> mu,
    std::function<void(const IoOp&)> on_enqueue = {}) {
  return [log, mu, on_enqueue](BorrowedFd fd, unsigned depth) -> Result<std::unique_ptr<IoEngine>> {
    ASSIGN_OR_RETURN(auto inner, ThreadPoolEngine::create(fd, depth));
    return std::unique_ptr<IoEngine>(
        std::make_unique<RecordingEngine>(std::move(inner), log, mu, on_enqueue));
  };
}

}  // namespace tern::testing
