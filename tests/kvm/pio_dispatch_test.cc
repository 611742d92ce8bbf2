// kvm tests: PIO exits reach the registered device; unclaimed ports read all-ones and a storm of
// unclaimed writes does not stop the VM.
#include <gtest/gtest.h>
#include <linux/kvm.h>

#include "tests/kvm/tiny_vm.h"

namespace tern::testing {
namespace {

// 64-bit guest code (hand-assembled):
//   mov al,0x42; mov dx,0x500; out dx,al        -> recorder gets 0x42
//   mov dx,0x510; in al,dx                      -> unclaimed: 0xFF
//   mov dx,0x500; out dx,al                     -> recorder gets 0xFF
//   mov dx,0x500; in al,dx; mov dx,0x500; out dx,al -> recorder read (0x5a) echoed back
//   mov ecx,N; mov dx,0x520; l: out dx,al; loop l   -> N unclaimed writes
//   mov dx,0x501; out dx,al                     -> recorder "done"
//   jmp $
constexpr uint32_t kStorm = 5000;
const uint8_t kCode[] = {
    0xB0, 0x42, 0x66, 0xBA, 0x00, 0x05, 0xEE,              //
    0x66, 0xBA, 0x10, 0x05, 0xEC,                          //
    0x66, 0xBA, 0x00, 0x05, 0xEE,                          //
    0x66, 0xBA, 0x00, 0x05, 0xEC, 0x66, 0xBA, 0x00, 0x05, 0xEE,  //
    0xB9, kStorm & 0xff, (kStorm >> 8) & 0xff, 0x00, 0x00,  //
    0x66, 0xBA, 0x20, 0x05, 0xEE, 0xE2, 0xFD,              //
    0x66, 0xBA, 0x01, 0x05, 0xEE,                          //
    0xEB, 0xFE,
};

TEST(PioDispatch, RegisteredDeviceUnclaimedReadsAndWriteStorm) {
  auto vm = TinyVm::create(kCode);
  if (!vm) GTEST_SKIP() << "/dev/kvm not available";
  auto rec = std::make_shared<RecordingDevice>(vm->stop);
  ASSERT_TRUE(vm->pio.insert(rec, 0x500, 2));
  StopEvent e = vm->run();
  EXPECT_EQ(e.kind, StopKind::kPowerOff) << e.detail;
  ASSERT_EQ(rec->values.size(), 3u);
  EXPECT_EQ(rec->values[0], 0x42);
  EXPECT_EQ(rec->values[1], 0xFF);  // unclaimed read returned all-ones
  EXPECT_EQ(rec->values[2], 0x5a);  // the device's read value reached the guest
  EXPECT_EQ(rec->reads, 1);
  EXPECT_EQ(vm->pio.unclaimed_reads(), 1u);
  EXPECT_EQ(vm->pio.unclaimed_writes(), kStorm);
  // 1 + 1 + 1 + 2 + kStorm + 1 port I/O exits.
  EXPECT_EQ(vm->stats().get(KVM_EXIT_IO), 6u + kStorm);
}

}  // namespace
}  // namespace tern::testing
