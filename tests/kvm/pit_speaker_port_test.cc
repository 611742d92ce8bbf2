// kvm tests: port 0x61 (NMI status and control, "system control port B") is KVM's, as tern creates
// the PIT (KvmVm::create_pit2, KVM_PIT_SPEAKER_DUMMY): a guest that times a PIT channel-2 one-shot
// through it, as memtest86+ calibrates its TSC (system/timers.c) and SeaBIOS its delays, sees the
// output low right after arming and high once the count expires — and tern never sees the port.
#include <gtest/gtest.h>
#include <linux/kvm.h>

#include "tests/kvm/tiny_vm.h"

namespace tern::testing {
namespace {

constexpr uint8_t kPortBOut2 = 0x20;  ///< Port 0x61 bit 5: PIT channel 2's output.

// 64-bit guest code (assembled with GNU as, checked with objdump):
//   0x00  in al,0x61; and al,0xfc; or al,1; out 0x61,al   ; gate 2 on, speaker data off
//   0x08  mov al,0xb0; out 0x43,al                         ; channel 2, lo/hi byte, mode 0
//   0x0c  mov al,0x0b; out 0x42,al; mov al,0xe9; out 0x42,al ; count 59659: 50 ms at 1.193182 MHz
//   0x14  in al,0x61; mov dx,0x500; out dx,al              ; recorder[0]: port B right after arming
//   0x1b  mov ecx,0x10000000
//   0x20  l: in al,0x61; test al,0x20; jnz d; loop l       ; wait for OUT2 (bounded)
//   0x28  d: out dx,al                                     ; recorder[1]: port B when the wait ended
//   0x29  mov dx,0x501; out dx,al; hlt                     ; done
const uint8_t kCode[] = {
    0xE4, 0x61, 0x24, 0xFC, 0x0C, 0x01, 0xE6, 0x61,  //
    0xB0, 0xB0, 0xE6, 0x43,                          //
    0xB0, 0x0B, 0xE6, 0x42, 0xB0, 0xE9, 0xE6, 0x42,  //
    0xE4, 0x61, 0x66, 0xBA, 0x00, 0x05, 0xEE,        //
    0xB9, 0x00, 0x00, 0x00, 0x10,                    //
    0xE4, 0x61, 0xA8, 0x20, 0x75, 0x02, 0xE2, 0xF8,  //
    0xEE,                                            //
    0x66, 0xBA, 0x01, 0x05, 0xEE, 0xF4,
};

TEST(PitSpeakerPort, Channel2OneShotIsTimedThroughPort61) {
  auto vm = TinyVm::create(kCode);
  if (!vm) GTEST_SKIP() << "/dev/kvm not available";
  ASSERT_TRUE(vm->kvm_vm().create_pit2());
  auto rec = std::make_shared<RecordingDevice>(vm->stop);
  ASSERT_TRUE(vm->pio.insert(rec, 0x500, 2));
  StopEvent e = vm->run();
  EXPECT_EQ(e.kind, StopKind::kPowerOff) << e.detail;
  ASSERT_EQ(rec->values.size(), 2u);
  // Unclaimed, port 0x61 would read 0xFF: OUT2 "high" before the count could have run down.
  EXPECT_EQ(rec->values[0] & kPortBOut2, 0) << "port 0x61 read " << int{rec->values[0]};
  EXPECT_EQ(rec->values[0] & 0x01, 0x01) << "gate 2 does not read back";
  EXPECT_EQ(rec->values[1] & kPortBOut2, kPortBOut2) << "OUT2 never went high";
  EXPECT_EQ(vm->pio.unclaimed_reads(), 0u);
  EXPECT_EQ(vm->pio.unclaimed_writes(), 0u);
}

}  // namespace
}  // namespace tern::testing
