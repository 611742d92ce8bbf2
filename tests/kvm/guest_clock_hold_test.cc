// kvm tests: GuestClockHold stops the guest's kvmclock while tern holds the VM — after release()
// it goes on from the held value, not from where KVM's clock ran meanwhile.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <unistd.h>

#include <optional>

#include "kvm/guest_clock_hold.h"
#include "kvm/kvm_system.h"

namespace tern::testing {
namespace {

constexpr uint64_t kHeldNs = 500'000'000;  // how far KVM's clock runs on while held

struct ClockVm {
  std::optional<KvmSystem> sys;
  std::optional<KvmVm> vm;
  static std::optional<ClockVm> create() {
    if (::access("/dev/kvm", R_OK | W_OK) != 0) return std::nullopt;
    ClockVm c;
    auto sys = KvmSystem::open();
    if (!sys) return std::nullopt;
    c.sys.emplace(std::move(*sys));
    auto vm = c.sys->create_vm();
    EXPECT_TRUE(vm) << vm.error().message();
    if (!vm) return std::nullopt;
    c.vm.emplace(std::move(*vm));
    return c;
  }
  uint64_t now() const {
    auto c = vm->get_clock();
    EXPECT_TRUE(c) << c.error().message();
    return c ? c->clock : 0;
  }
  /// Waits (by reading it, no sleep) until KVM's clock passed `ns`.
  void run_past(uint64_t ns) const {
    while (now() < ns) {
    }
  }
};

TEST(GuestClockHold, ReleaseGoesOnFromTheHeldValue) {
  auto c = ClockVm::create();
  if (!c) GTEST_SKIP() << "/dev/kvm not available";
  GuestClockHold hold;
  ASSERT_TRUE(hold.hold(*c->vm));
  ASSERT_TRUE(hold.held_ns());
  const uint64_t held = *hold.held_ns();
  c->run_past(held + kHeldNs);  // the time tern holds the VM
  ASSERT_TRUE(hold.hold(*c->vm));  // a second hold keeps the first value
  EXPECT_EQ(hold.held_ns(), held);
  ASSERT_TRUE(hold.release(*c->vm));
  EXPECT_FALSE(hold.held_ns());
  const uint64_t after = c->now();
  EXPECT_GE(after, held);
  EXPECT_LT(after, held + kHeldNs) << "the guest's clock counted the time it was held";
  ASSERT_TRUE(hold.release(*c->vm));  // nothing held: no-op
  EXPECT_GE(c->now(), after);
}

TEST(GuestClockHold, HoldAtSetsTheSavedValueAtRelease) {
  auto c = ClockVm::create();
  if (!c) GTEST_SKIP() << "/dev/kvm not available";
  const uint64_t saved = 1000ull * 1000 * 1000 * 1000;  // a restored VM's kvmclock: 1000 s
  GuestClockHold hold;
  hold.hold_at(saved);
  c->run_past(c->now() + kHeldNs);  // the restored VM waits for its resume
  ASSERT_TRUE(hold.release(*c->vm));
  const uint64_t after = c->now();
  EXPECT_GE(after, saved);
  EXPECT_LT(after, saved + kHeldNs);
}

// A release() that failed (KVM_SET_CLOCK refused) is followed by the vCPUs running all the same
// (Vm::resume/start only log it): the held value is stale from then on. The next pause must hold
// the clock of that pause, not the old value — else its resume (or a snapshot taken meanwhile)
// would set the guest's kvmclock back by all the time the VM ran in between.
TEST(GuestClockHold, AFailedReleaseIsNotHeldOverToTheNextPause) {
  auto c = ClockVm::create();
  if (!c) GTEST_SKIP() << "/dev/kvm not available";
  UniqueFd not_kvm(::open("/dev/null", O_RDWR | O_CLOEXEC));
  ASSERT_TRUE(not_kvm.valid());
  KvmVm refusing(std::move(not_kvm), 0);  // every VM ioctl fails (ENOTTY)
  GuestClockHold hold;
  ASSERT_TRUE(hold.hold(*c->vm));
  const uint64_t first = *hold.held_ns();
  EXPECT_FALSE(hold.release(refusing));
  c->run_past(first + kHeldNs);  // the VM runs on, its clock unheld
  ASSERT_TRUE(hold.hold(*c->vm));  // the next pause
  ASSERT_TRUE(hold.held_ns());
  EXPECT_GE(*hold.held_ns(), first + kHeldNs) << "the next pause held the first pause's clock";
}

}  // namespace
}  // namespace tern::testing
