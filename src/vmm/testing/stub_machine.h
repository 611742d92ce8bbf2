// StubMachine: a Machine that does nothing, for tests that drive the control loop or the API
// without KVM. Stop goes through a StopLatch (stop() posts, wait_stopped() returns it); start,
// finish, pause and resume do nothing; Ctrl+Alt+Del is refused; a snapshot save fails; the
// statistics are an empty object. A test's fake derives from it and overrides what it checks.
#pragma once

#include <atomic>
#include <string>

#include "vmm/machine.h"

namespace tern::testing {

/// See the file comment.
class StubMachine : public Machine {
 public:
  /// Statistics with no fields: `{}` and no metrics.
  class EmptyStats : public StatsSource {
   public:
    nlohmann::json stats_json() const override { return nlohmann::json::object(); }
    std::string metrics_text() const override { return ""; }
  };

  void start() override {}
  StopEvent wait_stopped() override { return latch.wait(); }
  void stop(StopEvent e) override { latch.post(std::move(e)); }
  void finish() override {}
  void pause() override {}
  void resume() override {}
  bool send_ctrl_alt_del() override { return false; }
  Result<SnapshotReport> save_snapshot(const SnapshotCreateSpec&, const SaveProgress&,
                                       const std::atomic<bool>&) override {
    return fail("save", "not in this test");
  }
  const StatsSource& stats() const override { return empty_stats_; }

  StopLatch latch;  ///< What stop() posted; wait_stopped() returns it.

 private:
  EmptyStats empty_stats_;
};

}  // namespace tern::testing
