#include "api/event_log.h"

#include "api/api_request.h"

namespace tern {

void EventLog::publish(nlohmann::json event) {
  std::lock_guard lock(mu_);
  event["seq"] = ++seq_;
  event["uptime_ms"] = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::steady_clock::now() - t0_)
                           .count();
  std::string line = json_text(event) + "\n";
  backlog_.push_back(line);
  if (backlog_.size() > kBacklog) backlog_.pop_front();
  for (auto& [id, l] : listeners_) l(line);
}

uint64_t EventLog::subscribe(Listener listener, std::vector<std::string>& backlog) {
  std::lock_guard lock(mu_);
  backlog.assign(backlog_.begin(), backlog_.end());
  uint64_t id = next_id_++;
  listeners_.emplace(id, std::move(listener));
  return id;
}

void EventLog::unsubscribe(uint64_t id) {
  std::lock_guard lock(mu_);
  listeners_.erase(id);
}

std::vector<std::string> EventLog::lines() const {
  std::lock_guard lock(mu_);
  return {backlog_.begin(), backlog_.end()};
}

}  // namespace tern
