// kvm tests: pausing a vCPU parks its thread outside KVM_RUN (sleeping, not spinning) with every
// PIO exit completed, and 100 pause/resume cycles leave the guest running correctly.
#include <gtest/gtest.h>

#include <condition_variable>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "tests/kvm/tiny_vm.h"

namespace tern::testing {
namespace {

// The guest loops forever:  l: mov dx,0x501; in al,dx; mov dx,0x500; out dx,al; jmp l
// The device hands out 0,1,2,... on each IN and checks that the next OUT echoes it: an IN whose
// completion a pause lost (the value never written to AL) shows up as a mismatch.
const uint8_t kEchoLoop[] = {
    0x66, 0xBA, 0x01, 0x05,  // mov dx, 0x501
    0xEC,                    // in al, dx
    0x66, 0xBA, 0x00, 0x05,  // mov dx, 0x500
    0xEE,                    // out dx, al
    0xEB, 0xF4,              // jmp l
};

class EchoDevice : public BusDevice {
 public:
  std::string_view name() const override { return "echo"; }
  void read(uint64_t, std::span<uint8_t> data) override {
    std::lock_guard lock(mu_);
    data[0] = static_cast<uint8_t>(next_);
    expected_ = static_cast<uint8_t>(next_++);
  }
  void write(uint64_t, std::span<const uint8_t> data) override {
    std::lock_guard lock(mu_);
    if (data[0] != expected_) ++mismatches_;
    ++echoes_;
    cv_.notify_all();
  }
  /// Blocks until more than `n` echoes happened (bounded, so a hung guest fails instead of hanging).
  bool wait_beyond(uint64_t n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(30), [&] { return echoes_ > n; });
  }
  uint64_t echoes() {
    std::lock_guard lock(mu_);
    return echoes_;
  }
  uint64_t mismatches() {
    std::lock_guard lock(mu_);
    return mismatches_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t next_ = 0;
  uint8_t expected_ = 0;
  uint64_t echoes_ = 0;
  uint64_t mismatches_ = 0;
};

/// The scheduler state letter of thread `tid` ('R' running, 'S' sleeping, ...).
char thread_state(pid_t tid) {
  std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto close = s.rfind(')');
  return close != std::string::npos && close + 2 < s.size() ? s[close + 2] : '?';
}

TEST(PauseResume, HundredCyclesParkedAndConsistent) {
  auto vm = TinyVm::create(kEchoLoop);
  if (!vm) GTEST_SKIP() << "/dev/kvm not available";
  auto dev = std::make_shared<EchoDevice>();
  ASSERT_TRUE(vm->pio.insert(dev, 0x500, 2));
  VcpuThread& t = vm->vcpu_thread();
  t.start();
  for (int cycle = 0; cycle < 100; ++cycle) {
    ASSERT_TRUE(dev->wait_beyond(dev->echoes())) << "guest not running, cycle " << cycle;
    t.request_pause();
    t.wait_paused();
    ASSERT_EQ(t.state(), VcpuThreadState::kPaused) << "cycle " << cycle;
    uint64_t at_pause = dev->echoes();
    // Parked on a condition variable: the kernel reports the thread sleeping. It is briefly
    // runnable between announcing kPaused and blocking, so look until it is seen asleep (a spinning
    // thread never is).
    bool asleep = false;
    for (int i = 0; i < 100000 && !asleep; ++i) {
      asleep = thread_state(t.tid()) == 'S';
      if (!asleep) std::this_thread::yield();
    }
    EXPECT_TRUE(asleep) << "cycle " << cycle;
    EXPECT_EQ(dev->echoes(), at_pause) << "the guest ran while paused, cycle " << cycle;
    t.resume();
  }
  ASSERT_TRUE(dev->wait_beyond(dev->echoes()));
  EXPECT_EQ(dev->mismatches(), 0u);
  // Pause, then stop while paused: stop() ends the park.
  t.request_pause();
  t.wait_paused();
  t.stop();
  t.join();
  EXPECT_EQ(t.state(), VcpuThreadState::kExited);
}

// The guest's clock runs on while its vCPU is parked: on resume the vCPU's pvclock page says the
// host stopped it (PVCLOCK_GUEST_STOPPED, KVM_KVMCLOCK_CTRL), so a Linux guest's soft-lockup
// watchdog takes a long pause for a host stop ("watchdog: BUG: soft lockup" otherwise).
TEST(PauseResume, ResumedGuestIsToldItWasStopped) {
  constexpr uint32_t kMsrKvmSystemTimeNew = 0x4b564d01;
  constexpr uint64_t kPvclockAddr = 0x190000;
  constexpr uint64_t kFlagsAddr = kPvclockAddr + 29;  // pvclock_vcpu_time_info.flags
  constexpr uint8_t kGuestStopped = 1u << 1;           // PVCLOCK_GUEST_STOPPED
  auto vm = TinyVm::create(kEchoLoop);
  if (!vm) GTEST_SKIP() << "/dev/kvm not available";
  auto dev = std::make_shared<EchoDevice>();
  ASSERT_TRUE(vm->pio.insert(dev, 0x500, 2));
  VcpuThread& t = vm->vcpu_thread();
  MsrValue on{kMsrKvmSystemTimeNew, kPvclockAddr | 1};  // kvmclock on, as Linux turns it on
  auto n = t.vcpu().set_msrs(std::span<const MsrValue>(&on, 1));
  ASSERT_TRUE(n) << n.error().message();
  if (*n != 1) GTEST_SKIP() << "this KVM has no kvmclock";
  auto flags = [&] {
    uint8_t f = 0;
    EXPECT_TRUE(vm->memory().read(kFlagsAddr, std::span<uint8_t>(&f, 1)));
    return f;
  };
  t.start();
  ASSERT_TRUE(dev->wait_beyond(0));
  if (vm->memory().read_obj<uint64_t>(kPvclockAddr + 8).value_or(0) == 0)
    GTEST_SKIP() << "this KVM does not write the pvclock page";
  EXPECT_EQ(flags() & kGuestStopped, 0) << "a guest never paused reads as stopped";
  t.request_pause();
  t.wait_paused();
  t.resume();
  ASSERT_TRUE(dev->wait_beyond(dev->echoes()));  // ran again: KVM updated the page on entry
  EXPECT_EQ(flags() & kGuestStopped, kGuestStopped) << "pvclock flags " << int{flags()};
  t.stop();
  t.join();
}

TEST(PauseResume, ResumeBeforeParkedAndPauseWhenExited) {
  auto vm = TinyVm::create(kEchoLoop);
  if (!vm) GTEST_SKIP() << "/dev/kvm not available";
  auto dev = std::make_shared<EchoDevice>();
  ASSERT_TRUE(vm->pio.insert(dev, 0x500, 2));
  VcpuThread& t = vm->vcpu_thread();
  t.start();
  ASSERT_TRUE(dev->wait_beyond(0));
  t.request_pause();
  t.resume();  // may land before the thread parks: it must simply keep running
  ASSERT_TRUE(dev->wait_beyond(dev->echoes()));
  EXPECT_EQ(t.state(), VcpuThreadState::kRunning);
  t.stop();
  t.join();
  t.request_pause();  // no-op on an exited thread
  t.wait_paused();    // returns at once
  EXPECT_EQ(t.state(), VcpuThreadState::kExited);
  EXPECT_EQ(dev->mismatches(), 0u);
}

}  // namespace
}  // namespace tern::testing
