// Unit tests: the lifecycle table's transitions and shown names.
#include "vmm/vm_state.h"

#include <gtest/gtest.h>

namespace tern {
namespace {

TEST(VmLifecycle, BootPauseResumeStop) {
  VmLifecycle l;
  EXPECT_STREQ(l.name(), "Not started");
  EXPECT_FALSE(l.allows(VmEvent::kPause));
  EXPECT_FALSE(l.apply(VmEvent::kConfigure));  // still shown "Not started": no event
  EXPECT_EQ(l.state(), VmState::kConfigured);
  EXPECT_FALSE(l.allows(VmEvent::kRestore));   // the snapshot defines the VM
  EXPECT_TRUE(l.apply(VmEvent::kStart));
  EXPECT_STREQ(l.name(), "Running");
  EXPECT_FALSE(l.allows(VmEvent::kConfigure));
  EXPECT_FALSE(l.allows(VmEvent::kStart));
  EXPECT_FALSE(l.allows(VmEvent::kSaveBegin));  // pause first
  EXPECT_TRUE(l.apply(VmEvent::kPause));
  EXPECT_STREQ(l.name(), "Paused");
  EXPECT_TRUE(l.has_vm());
  EXPECT_TRUE(l.apply(VmEvent::kGuestStopped));
  EXPECT_STREQ(l.name(), "Stopped");
  EXPECT_FALSE(l.has_vm());
  EXPECT_FALSE(l.allows(VmEvent::kPowerOff));
}

TEST(VmLifecycle, RestoredSavingAndStopping) {
  VmLifecycle l;
  EXPECT_TRUE(l.apply(VmEvent::kRestore));
  EXPECT_EQ(l.state(), VmState::kRestored);
  EXPECT_STREQ(l.name(), "Paused");
  EXPECT_FALSE(l.apply(VmEvent::kSaveBegin));  // shown "Paused" throughout
  EXPECT_FALSE(l.allows(VmEvent::kResume));
  EXPECT_FALSE(l.allows(VmEvent::kSaveBegin));
  l.apply(VmEvent::kSaveEnd);
  EXPECT_EQ(l.state(), VmState::kRestored);  // back where the save began
  l.apply(VmEvent::kResume);
  EXPECT_EQ(l.state(), VmState::kRunning);
  EXPECT_FALSE(l.apply(VmEvent::kPowerOff));
  EXPECT_EQ(l.state(), VmState::kStopping);
  EXPECT_STREQ(l.name(), "Running");
  EXPECT_FALSE(l.allows(VmEvent::kPause));
  EXPECT_TRUE(l.apply(VmEvent::kGuestStopped));
  EXPECT_EQ(l.state(), VmState::kStopped);
}

TEST(VmLifecycle, PowerOffDuringASaveShowsPaused) {
  VmLifecycle l;
  l.apply(VmEvent::kStart);
  l.apply(VmEvent::kPause);
  l.apply(VmEvent::kSaveBegin);
  EXPECT_FALSE(l.apply(VmEvent::kPowerOff));
  EXPECT_STREQ(l.name(), "Paused");
  EXPECT_FALSE(l.allows(VmEvent::kSaveEnd));  // the save's answer comes after power-off
}

}  // namespace
}  // namespace tern
