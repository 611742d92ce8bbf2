// EventWaiter: a test's subscriber to an EventLog that blocks until the n-th event of a kind
// was published (no sleeps, no polling).
#pragma once

#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/event_log.h"

namespace tern::testing {

/// Events published (the backlog included), waited for by kind and count.
class EventWaiter {
 public:
  explicit EventWaiter(EventLog& log) : log_(log) {
    std::vector<std::string> backlog;
    id_ = log.subscribe(
        [this](const std::string& line) {
          std::lock_guard lock(mu_);
          lines_.push_back(nlohmann::json::parse(line));
          cv_.notify_all();
        },
        backlog);
    std::lock_guard lock(mu_);  // live lines may already be in: the backlog goes before them
    std::vector<nlohmann::json> past;
    for (auto& l : backlog) past.push_back(nlohmann::json::parse(l));
    lines_.insert(lines_.begin(), past.begin(), past.end());
  }
  ~EventWaiter() { log_.unsubscribe(id_); }
  /// Blocks until `n` events named `event` were published; the n-th.
  nlohmann::json wait(const std::string& event, size_t n) {
    std::unique_lock lock(mu_);
    nlohmann::json found;
    cv_.wait(lock, [&] {
      size_t seen = 0;
      for (auto& l : lines_)
        if (l["event"] == event && ++seen == n) {
          found = l;
          return true;
        }
      return false;
    });
    return found;
  }

 private:
  EventLog& log_;
  uint64_t id_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<nlohmann::json> lines_;
};

}  // namespace tern::testing
