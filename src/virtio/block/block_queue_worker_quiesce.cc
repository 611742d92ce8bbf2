// BlockQueueWorker pause/resume for snapshots (VirtioDevice::quiesce).
#include "virtio/block/block_queue_worker.h"

#include <unistd.h>

namespace tern::virtio {

QueuePosition BlockQueueWorker::pause() {
  {
    std::lock_guard lock(park_mu_);
    if (exited_) return parked_at_;
    pause_requested_ = true;
  }
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(pause_.get(), &one, sizeof one);
  std::unique_lock lock(park_mu_);
  park_cv_.wait(lock, [&] { return parked_ || exited_; });
  return parked_at_;
}

void BlockQueueWorker::resume() {
  std::unique_lock lock(park_mu_);
  if (!pause_requested_) return;
  pause_requested_ = false;
  park_cv_.notify_all();
  // Return once the worker is running again, so a following pause() parks it afresh.
  park_cv_.wait(lock, [&] { return !parked_ || exited_; });
}

bool BlockQueueWorker::park() {
  // Every request taken from the ring completes into the used ring, published with its
  // interrupt: after this the ring positions describe the whole device state.
  drain_engine();
  std::unique_lock lock(park_mu_);
  parked_at_ = QueuePosition{vq_.last_avail_idx(), vq_.used_idx()};
  parked_ = true;
  park_cv_.notify_all();
  park_cv_.wait(lock, [&] { return !pause_requested_ || stopping_; });
  parked_ = false;
  park_cv_.notify_all();
  return !stopping_;
}

}  // namespace tern::virtio
