// kvm tests: the PC chipset of firmware boots under real PIO exits — configuration cycles to the
// i440FX and the PIIX4 PM function, the PM timer at 0xB008 once the guest enabled it the way
// SeaBIOS does, and a reset through the Reset Control register at 0xCF9.
#include "devices/pci/pc_chipset.h"

#include <gtest/gtest.h>
#include <linux/kvm.h>

#include <vector>

#include "tests/kvm/tiny_vm.h"

namespace tern::testing {
namespace {

// Hand-assembled 64-bit guest code.
void mov_eax(std::vector<uint8_t>& c, uint32_t v) {
  c.insert(c.end(), {0xB8, uint8_t(v), uint8_t(v >> 8), uint8_t(v >> 16), uint8_t(v >> 24)});
}
void mov_dx(std::vector<uint8_t>& c, uint16_t port) {
  c.insert(c.end(), {0x66, 0xBA, uint8_t(port), uint8_t(port >> 8)});
}
void out_eax(std::vector<uint8_t>& c, uint16_t port, uint32_t v) {
  mov_eax(c, v);
  mov_dx(c, port);
  c.push_back(0xEF);  // out dx, eax
}
/// in eax, dx from `port`, then its 4 bytes to the recorder at 0x500, low byte first.
void in_eax_to_recorder(std::vector<uint8_t>& c, uint16_t port) {
  mov_dx(c, port);
  c.push_back(0xED);  // in eax, dx
  mov_dx(c, 0x500);
  for (int i = 0; i < 4; ++i) {
    if (i > 0) c.insert(c.end(), {0xC1, 0xE8, 0x08});  // shr eax, 8
    c.push_back(0xEE);                                 // out dx, al
  }
}
uint32_t word_at(const std::vector<uint8_t>& v, size_t i) {
  return v[i] | v[i + 1] << 8 | v[i + 2] << 16 | uint32_t{v[i + 3]} << 24;
}

TEST(PcChipsetKvm, ConfigCyclesPmTimerAndResetControl) {
  std::vector<uint8_t> code;
  out_eax(code, 0xCF8, 0x80000000);  // 00:00.0 vendor/device
  in_eax_to_recorder(code, 0xCFC);
  out_eax(code, 0xCF8, 0x80000B40);  // 00:01.3 PMBA = 0xB000 | 1
  out_eax(code, 0xCFC, 0xB001);
  out_eax(code, 0xCF8, 0x80000B80);  // PMREGMISC.PMIOSE
  code.insert(code.end(), {0xB0, 0x01});
  mov_dx(code, 0xCFC);
  code.push_back(0xEE);  // out dx, al
  in_eax_to_recorder(code, 0xB008);
  in_eax_to_recorder(code, 0xB008);
  code.insert(code.end(), {0xB0, 0x06});  // RC: SRST | RCPU
  mov_dx(code, 0xCF9);
  code.push_back(0xEE);
  code.insert(code.end(), {0xEB, 0xFE});  // jmp $

  auto vm = TinyVm::create(code);
  if (!vm) GTEST_SKIP() << "/dev/kvm not available";
  auto rec = std::make_shared<RecordingDevice>(vm->stop);
  ASSERT_TRUE(vm->pio.insert(rec, 0x500, 2));
  PciRoot root(x86::kPciMmioStart, x86::kPciMmioEnd - x86::kPciMmioStart);
  PcChipsetHooks hooks;
  hooks.on_reset = [&] { vm->stop.post(StopEvent{StopKind::kReboot, 0, 0, "reset control"}); };
  auto chipset = attach_pc_chipset(root, vm->pio, std::move(hooks));
  ASSERT_TRUE(chipset) << chipset.error().message();
  ASSERT_TRUE(root.attach(vm->pio, vm->mmio));

  StopEvent e = vm->run();
  EXPECT_EQ(e.kind, StopKind::kReboot) << e.detail;
  ASSERT_EQ(rec->values.size(), 12u);
  EXPECT_EQ(word_at(rec->values, 0), 0x12378086u);
  const uint32_t t1 = word_at(rec->values, 4), t2 = word_at(rec->values, 8);
  EXPECT_EQ(t1 & ~PmTimer::kMask, 0u);
  EXPECT_EQ(t2 & ~PmTimer::kMask, 0u);
  EXPECT_LT((t2 - t1) & PmTimer::kMask, 0x800000u);  // forward (less than half a wrap)
  EXPECT_EQ((*chipset)->reset_control->reset_requests(), 1u);
  EXPECT_EQ((*chipset)->pm_io->misplaced_accesses(), 0u);
}

}  // namespace
}  // namespace tern::testing
