#include "devices/device_activator.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "devices/testing/fake_control_thread.h"

namespace tern {
namespace {

using testing::FakeControlThread;

TEST(DeviceActivatorTest, WithoutControlThreadRunsInline) {
  DeviceActivator a;
  std::thread::id ran_on;
  a.run([&] { ran_on = std::this_thread::get_id(); });
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  EXPECT_EQ(a.inline_runs(), 1u);
  EXPECT_EQ(a.queued_runs(), 0u);
}

TEST(DeviceActivatorTest, RunsOnTheControlThreadWhileTheCallerWaits) {
  DeviceActivator a;
  FakeControlThread ctl(a);
  std::thread::id ran_on;
  bool returned_after_work = false;
  std::thread vcpu([&] {
    bool done = false;
    a.run([&] {
      ran_on = std::this_thread::get_id();
      done = true;
    });
    returned_after_work = done;  // the barrier: run() returns only after the work
  });
  vcpu.join();
  EXPECT_EQ(ran_on, ctl.id());
  EXPECT_TRUE(returned_after_work);
  EXPECT_EQ(a.queued_runs(), 1u);
  EXPECT_EQ(a.inline_runs(), 0u);
}

TEST(DeviceActivatorTest, ControlThreadItselfRunsInline) {
  DeviceActivator a;
  FakeControlThread ctl(a, /*serving=*/false);
  std::thread::id ran_on;
  ctl.call([&] { a.run([&] { ran_on = std::this_thread::get_id(); }); });
  EXPECT_EQ(ran_on, ctl.id());
  EXPECT_EQ(a.inline_runs(), 1u);
}

// Vm::pause: the control thread waits for a vCPU that waits for the control thread. The inline
// scope hands the work back to the vCPU, which runs it and can then park.
TEST(DeviceActivatorTest, PauseWhileAVcpuWaitsDoesNotDeadlock) {
  DeviceActivator a;
  FakeControlThread ctl(a, /*serving=*/false);  // busy: it will not serve before pausing
  std::thread::id vcpu_id, ran_on;
  int runs = 0;
  std::thread vcpu([&] {
    vcpu_id = std::this_thread::get_id();
    a.run([&] {
      ran_on = std::this_thread::get_id();
      ++runs;
    });
  });
  ctl.wait_notifications(1);  // the work is queued and the vCPU is waiting
  ctl.call([&] {
    auto scope = a.inline_scope();
    vcpu.join();  // stands for VcpuThread::wait_paused()
  });
  EXPECT_EQ(ran_on, vcpu_id);
  ctl.set_serving(true);
  ctl.call([&] { a.run_pending(); });  // nothing left: the work is never run twice
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(a.queued_runs(), 0u);
  EXPECT_EQ(a.inline_runs(), 1u);
}

TEST(DeviceActivatorTest, InsideAnInlineScopeNewWorkRunsInline) {
  DeviceActivator a;
  FakeControlThread ctl(a, /*serving=*/false);
  std::thread::id vcpu_id, ran_on;
  ctl.call([&] {
    auto scope = a.inline_scope();
    std::thread vcpu([&] {
      vcpu_id = std::this_thread::get_id();
      a.run([&] { ran_on = std::this_thread::get_id(); });
    });
    vcpu.join();
  });
  EXPECT_EQ(ran_on, vcpu_id);
  EXPECT_EQ(a.queued_runs(), 0u);
}

TEST(DeviceActivatorTest, DetachHandsQueuedWorkBack) {
  DeviceActivator a;
  auto ctl = std::make_unique<FakeControlThread>(a, /*serving=*/false);
  int runs = 0;
  std::thread vcpu([&] { a.run([&] { ++runs; }); });
  ctl->wait_notifications(1);
  ctl.reset();  // the control loop goes away (detach) without serving
  vcpu.join();
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(a.inline_runs(), 1u);
}

// Many vCPUs, a serving control thread that keeps entering and leaving inline scopes: every
// job runs exactly once, by the control thread or by its own caller.
TEST(DeviceActivatorTest, EveryJobRunsExactlyOnce) {
  constexpr int kThreads = 4, kJobs = 200;
  DeviceActivator a;
  FakeControlThread ctl(a);
  std::vector<std::vector<int>> runs(kThreads, std::vector<int>(kJobs, 0));
  std::atomic<int> finished{0};
  std::vector<std::thread> vcpus;
  for (int t = 0; t < kThreads; ++t)
    vcpus.emplace_back([&, t] {
      for (int j = 0; j < kJobs; ++j) a.run([&, t, j] { ++runs[t][j]; });
      finished.fetch_add(1);
    });
  while (finished.load() < kThreads) ctl.call([&] { auto scope = a.inline_scope(); });
  for (auto& v : vcpus) v.join();
  for (const auto& per_thread : runs)
    for (int r : per_thread) EXPECT_EQ(r, 1);
  EXPECT_EQ(a.queued_runs() + a.inline_runs(), uint64_t{kThreads * kJobs});
}

}  // namespace
}  // namespace tern
