#include "api/event_stream_queue.h"

#include <algorithm>
#include <utility>

namespace tern {

EventStreamQueue::Push EventStreamQueue::push(const std::string& line) {
  std::lock_guard lock(mu_);
  if (overflowed_) return Push::kIgnored;
  const bool was_empty = queued_.empty();
  if (line.size() > limit_ - std::min(pending_, limit_)) {
    overflowed_ = true;
    queued_ += drop_line_;
    pending_ += drop_line_.size();
    return Push::kOverflowed;
  }
  queued_ += line;
  pending_ += line.size();
  return was_empty ? Push::kWake : Push::kQueued;
}

std::string EventStreamQueue::take() {
  std::lock_guard lock(mu_);
  return std::exchange(queued_, std::string());
}

void EventStreamQueue::written(size_t bytes) {
  std::lock_guard lock(mu_);
  pending_ -= std::min(bytes, pending_);
}

bool EventStreamQueue::overflowed() const {
  std::lock_guard lock(mu_);
  return overflowed_;
}

size_t EventStreamQueue::pending_bytes() const {
  std::lock_guard lock(mu_);
  return pending_;
}

}  // namespace tern
