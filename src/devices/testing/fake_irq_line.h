// FakeIrqLine: records the levels a device reports on its IrqLine (unit tests only).
#pragma once

#include <cstddef>
#include <mutex>
#include <vector>

#include "devices/irq_line.h"

namespace tern::testing {

class FakeIrqLine {
 public:
  IrqLine line() {
    return [this](bool level) {
      std::lock_guard lock(mu_);
      levels_.push_back(level);
    };
  }
  /// The current level (low until first reported).
  bool level() const {
    std::lock_guard lock(mu_);
    return !levels_.empty() && levels_.back();
  }
  /// Number of 0 -> 1 transitions reported: what an edge-triggered input would see.
  size_t rising_edges() const {
    std::lock_guard lock(mu_);
    size_t n = 0;
    bool prev = false;
    for (bool l : levels_) {
      if (l && !prev) ++n;
      prev = l;
    }
    return n;
  }
  /// True if two consecutive reports ever had the same level (the device should dedupe).
  bool has_repeats() const {
    std::lock_guard lock(mu_);
    for (size_t i = 1; i < levels_.size(); ++i)
      if (levels_[i] == levels_[i - 1]) return true;
    return !levels_.empty() && !levels_.front();  // first report of "low" is a repeat too
  }
  std::vector<bool> levels() const {
    std::lock_guard lock(mu_);
    return levels_;
  }
  void clear_history() {
    std::lock_guard lock(mu_);
    if (!levels_.empty()) levels_ = {levels_.back()};
  }

 private:
  mutable std::mutex mu_;
  std::vector<bool> levels_;
};

}  // namespace tern::testing
