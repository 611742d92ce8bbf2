#include "vmm/snapshot_progress.h"

namespace tern {

void SnapshotProgress::begin(const std::string& state_path, const std::string& mem_path) {
  std::lock_guard lock(mu_);
  start_ = std::chrono::steady_clock::now();
  seconds_ = 0;
  written_ = 0;
  state_path_ = state_path;
  mem_path_ = mem_path;
  error_.clear();
  done_ = 0;
  total_ = 0;
  phase_ = Phase::kSaving;
}

void SnapshotProgress::update(uint64_t done_bytes, uint64_t total_bytes) {
  total_ = total_bytes;
  done_ = done_bytes;
}

void SnapshotProgress::succeed(const SnapshotReport& r) {
  std::lock_guard lock(mu_);
  done_ = r.total_bytes;
  total_ = r.total_bytes;
  written_ = r.written_bytes;
  seconds_ = r.seconds;
  phase_ = Phase::kDone;
}

void SnapshotProgress::fail(const std::string& message) {
  std::lock_guard lock(mu_);
  seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  error_ = message;
  phase_ = Phase::kFailed;
}

nlohmann::json SnapshotProgress::json() const {
  static const char* names[] = {"idle", "saving", "done", "failed"};
  std::lock_guard lock(mu_);
  Phase p = phase_.load();
  double secs = p == Phase::kSaving
                    ? std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count()
                    : seconds_;
  uint64_t done = done_.load();
  nlohmann::json j = {{"phase", names[static_cast<int>(p)]},
                      {"done_bytes", done},
                      {"total_bytes", total_.load()},
                      {"written_bytes", written_},
                      {"seconds", secs},
                      {"bytes_per_s", secs > 0 ? static_cast<uint64_t>(done / secs) : 0}};
  if (p != Phase::kIdle) {
    j["state_path"] = state_path_;
    j["mem_path"] = mem_path_;
  }
  if (p == Phase::kFailed) j["error"] = error_;
  return j;
}

}  // namespace tern
