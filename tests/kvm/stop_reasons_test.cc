// kvm tests: guest events end the run with the documented StopKind.
#include <gtest/gtest.h>

#include "tests/kvm/tiny_vm.h"

namespace tern::testing {
namespace {

TEST(StopReasons, TripleFaultEndsTheRunAsTripleFault) {
  // ud2 with no IDT loaded: #UD cannot be delivered -> #DF -> triple fault -> KVM_EXIT_SHUTDOWN.
  const uint8_t code[] = {0x0F, 0x0B};
  auto vm = TinyVm::create(code);
  if (!vm) GTEST_SKIP() << "/dev/kvm not available";
  StopEvent e = vm->run();
  EXPECT_EQ(e.kind, StopKind::kTripleFault) << e.detail;
  EXPECT_EQ(e.vcpu, 0);
}

}  // namespace
}  // namespace tern::testing
