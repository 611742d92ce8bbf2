// SnapshotProgress: the state of the current (or last) snapshot save, written by the saving
// thread and read by GET /tern/stats ("snapshot") and `tern snapshot`'s progress bar.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "vmm/machine.h"

namespace tern {

class SnapshotProgress {
 public:
  enum class Phase { kIdle, kSaving, kDone, kFailed };

  /// A save of `state_path` + `mem_path` starts now.
  void begin(const std::string& state_path, const std::string& mem_path);
  /// Guest RAM bytes done / total (any thread).
  void update(uint64_t done_bytes, uint64_t total_bytes);
  void succeed(const SnapshotReport& r);
  void fail(const std::string& message);
  [[nodiscard]] bool saving() const { return phase_.load() == Phase::kSaving; }

  /// {"phase": "idle"|"saving"|"done"|"failed", "done_bytes", "total_bytes", "written_bytes",
  ///  "bytes_per_s" (guest RAM bytes per second so far), "seconds", "state_path", "mem_path",
  ///  "error"}.
  [[nodiscard]] nlohmann::json json() const;

 private:
  std::atomic<Phase> phase_{Phase::kIdle};
  std::atomic<uint64_t> done_{0}, total_{0};
  mutable std::mutex mu_;  // the fields below
  std::chrono::steady_clock::time_point start_{};
  double seconds_ = 0;
  uint64_t written_ = 0;
  std::string state_path_, mem_path_, error_;
};

}  // namespace tern
