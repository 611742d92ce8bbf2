// Unit tests: reboot in place in the control loop (--on-reboot), with a fake Machine (no KVM; the
// real reset is tests/kvm/reboot_in_place_test.cc): a reset request with "restart" resets the
// machine and starts it again ("reset" event, GET /tern/stats "lifecycle"), with "exit" it ends
// tern with status 3 (4 for a triple fault) as before; a failed reset ends it with status 1.
#include <gtest/gtest.h>
#include <signal.h>

#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <thread>

#include "api/api_parser.h"
#include "api/testing/event_waiter.h"
#include "vmm/control_loop.h"
#include "vmm/testing/stub_machine.h"

namespace tern {
namespace {

/// A Machine whose reset() is counted and gives it a fresh stop latch (as a rebuilt VM has).
class RebootingMachine : public testing::StubMachine {
 public:
  RebootingMachine(OnReboot on_reboot, bool reset_fails)
      : on_reboot_(on_reboot), reset_fails_(reset_fails) {}
  StopEvent wait_stopped() override { return latch_for_run().wait(); }
  void stop(StopEvent e) override { latch_for_run().post(std::move(e)); }
  void start() override { ++starts; }
  void pause() override { ++pauses; }
  OnReboot on_reboot() const override { return on_reboot_; }
  Result<void> reset() override {
    if (reset_fails_) return fail("reset: rebuilding the VM", "KVM_CREATE_VM: out of memory");
    std::lock_guard lock(mu_);
    latch_ = std::make_shared<StopLatch>();
    ++resets;
    return {};
  }
  std::atomic<int> starts{0};
  std::atomic<int> resets{0};
  std::atomic<int> pauses{0};

 private:
  StopLatch& latch_for_run() {
    std::lock_guard lock(mu_);
    return *latch_;  // a latch is never dropped while its run's waiter may use it (kept below)
  }
  OnReboot on_reboot_;
  bool reset_fails_;
  std::mutex mu_;
  std::shared_ptr<StopLatch> latch_ = std::make_shared<StopLatch>();
};

/// A control loop running a RebootingMachine on its own thread.
class Harness {
 public:
  Harness(OnReboot on_reboot, bool reset_fails = false) {
    auto loop = ControlLoop::create(
        [&, on_reboot, reset_fails](const VmConfig&)
            -> tl::expected<std::unique_ptr<Machine>, StartFailure> {
          auto m = std::make_unique<RebootingMachine>(on_reboot, reset_fails);
          machine = m.get();
          return m;
        },
        events);
    EXPECT_TRUE(loop);
    loop_ = std::move(*loop);
    VmResources r;
    r.boot = BootSource{};
    loop_->configure(r);
    EXPECT_TRUE(loop_->start());
    control_ = std::thread([this] { status_ = loop_->run(); });
  }
  ~Harness() {
    if (control_.joinable()) {
      loop_->queue().push(cmd::Signal{SIGTERM});
      control_.join();
    }
  }
  nlohmann::json get(std::string_view target) {
    auto req = parse_api_request("GET", target, {});
    EXPECT_TRUE(req);
    std::promise<ApiResponse> p;
    auto f = p.get_future();
    loop_->queue().push(
        cmd::Api{std::move(*req), [&p](ApiResponse r) { p.set_value(std::move(r)); }});
    return nlohmann::json::parse(f.get().body);
  }
  void signal(int signo) { loop_->queue().push(cmd::Signal{signo}); }
  int wait_status() {
    control_.join();
    return status_;
  }
  /// The guest asks for a reset (as the i8042 or the ACPI reset register posts it).
  void guest_reset(StopKind kind = StopKind::kReboot) {
    machine->stop(StopEvent{kind, 0, 0xfff0, "KVM_EXIT_IO: i8042 reset command 0xFE"});
  }

  EventLog events;
  RebootingMachine* machine = nullptr;

 private:
  std::unique_ptr<ControlLoop> loop_;
  std::thread control_;
  int status_ = -1;
};

TEST(ControlLoopReset, RestartResetsAndStartsTheSameMachineAgain) {
  Harness h(OnReboot::kRestart);
  testing::EventWaiter w(h.events);
  EXPECT_EQ(h.get("/tern/stats")["lifecycle"]["resets"], 0);
  h.guest_reset();
  auto ev = w.wait("reset", 1);
  EXPECT_EQ(ev["reason"], "reboot");
  EXPECT_EQ(ev["count"], 1);
  EXPECT_EQ(ev["vcpu"], 0);
  h.guest_reset(StopKind::kTripleFault);  // QEMU resets on a triple fault too
  EXPECT_EQ(w.wait("reset", 2)["reason"], "triple-fault");
  // The GET is queued after the second reset was handled.
  auto stats = h.get("/tern/stats");
  EXPECT_EQ(stats["lifecycle"]["resets"], 2);
  EXPECT_EQ(stats["lifecycle"]["last_reset_reason"], "triple-fault");
  EXPECT_EQ(h.get("/")["state"], "Running");
  EXPECT_EQ(h.machine->resets, 2);
  EXPECT_EQ(h.machine->starts, 3);
  // A power-off ends it as usual (status 0), no reset.
  h.machine->stop(StopEvent{StopKind::kPowerOff, 0, 0, "KVM_EXIT_IO: ACPI PM1a_CNT S5"});
  EXPECT_EQ(h.wait_status(), 0);
  EXPECT_EQ(h.machine->resets, 2);
}

TEST(ControlLoopReset, ExitKeepsTodaysStatuses) {
  {
    Harness h(OnReboot::kExit);
    h.guest_reset();
    EXPECT_EQ(h.wait_status(), 3);
    EXPECT_EQ(h.machine->resets, 0);
    EXPECT_EQ(h.machine->starts, 1);
  }
  Harness h(OnReboot::kExit);
  h.guest_reset(StopKind::kTripleFault);
  EXPECT_EQ(h.wait_status(), 4);
}

TEST(ControlLoopReset, FailedResetEndsTernWithStatusOne) {
  Harness h(OnReboot::kRestart, /*reset_fails=*/true);
  testing::EventWaiter w(h.events);
  h.guest_reset();
  EXPECT_EQ(h.wait_status(), 1);
  auto reset = w.wait("reset", 1);
  EXPECT_EQ(reset["count"], 1);
  EXPECT_NE(reset["error"].get<std::string>().find("KVM_CREATE_VM"), std::string::npos);
  auto stop = w.wait("stop", 1);
  EXPECT_EQ(stop["exit_status"], 1);
  EXPECT_EQ(stop["reason"], "reboot");
}

// A stop signal whose stop came after the guest's reset request (the latch keeps the reset):
// no restart, and tern ends for the signal (143), not with the reboot status 3. (The kvm test
// RebootInPlace.RestartBootsTheGuestAgainWithTheSameHostResources hit this race.)
TEST(ControlLoopReset, SignalDuringAResetEndsForTheSignal) {
  Harness h(OnReboot::kRestart);
  h.guest_reset();  // posted first: the latch holds it
  h.signal(SIGTERM);
  // Either the reset was handled before the signal (then the new machine stops with the
  // signal) or after it: 143 both ways.
  EXPECT_EQ(h.wait_status(), 128 + 15);
}

// A stop signal that arrived before the guest's reset request was handled wins: no restart.
TEST(ControlLoopReset, PowerOffRequestedMeanwhileIsNotRestarted) {
  Harness h(OnReboot::kRestart);
  h.machine->stop(StopEvent{StopKind::kStopped, -1, 0, "Terminated"});
  h.guest_reset();  // ignored by the latch: the first reason stands
  EXPECT_EQ(h.wait_status(), 128 + 15);
  EXPECT_EQ(h.machine->resets, 0);
}

}  // namespace
}  // namespace tern
