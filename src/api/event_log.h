// EventLog: the VM's lifecycle events (state changes, guest reboot/shutdown, API actions) as JSON
// lines, kept for late subscribers and pushed to live ones (GET /tern/events).
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace tern {

/// Thread-safe. publish() adds "seq" and "uptime_ms" and hands the line to every subscriber while
/// holding the log's lock, so a subscriber sees the backlog and then every later event exactly once,
/// in order. Subscriber callbacks must not block (the API server only posts to its io thread).
class EventLog {
 public:
  using Listener = std::function<void(const std::string& line)>;
  static constexpr size_t kBacklog = 256;

  EventLog() : t0_(std::chrono::steady_clock::now()) {}

  /// Appends `event` (an object with at least "event") and notifies subscribers.
  void publish(nlohmann::json event);
  /// Registers `listener`; `backlog` receives the retained past lines. Returns an id for
  /// unsubscribe().
  uint64_t subscribe(Listener listener, std::vector<std::string>& backlog);
  void unsubscribe(uint64_t id);
  /// The retained lines (tests, `tern ctl events` replay).
  [[nodiscard]] std::vector<std::string> lines() const;

 private:
  mutable std::mutex mu_;
  std::chrono::steady_clock::time_point t0_;
  uint64_t seq_ = 0;
  uint64_t next_id_ = 1;
  std::deque<std::string> backlog_;
  std::map<uint64_t, Listener> listeners_;
};

}  // namespace tern
