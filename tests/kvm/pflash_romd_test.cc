// kvm tests: the firmware ROM and OVMF's variable-store flash as the guest sees them — ROM reads
// are memory, ROM writes exit and are dropped; flash reads in read-array mode are memory (the
// KVM_MEM_READONLY ROMD slot), a command write unmaps it (status reads exit to the device), 0xFF
// maps it again, and the programmed byte reaches the vars file.
#include <gtest/gtest.h>
#include <linux/kvm.h>
#include <unistd.h>

#include <fstream>
#include <iterator>

#include "base/testing/temp_dir.h"
#include "firmware/pflash/pflash_device.h"
#include "firmware/rom_region.h"
#include "tests/kvm/tiny_vm.h"

namespace tern::testing {
namespace {

constexpr uint64_t kFlashGpa = 0xFFC00000;
constexpr uint64_t kFlashSize = 8 * 4096;
constexpr uint64_t kRomGpa = 0xFFE00000;
constexpr uint8_t kArrayReads = PflashDevice::kLazyRomdReads + 8;

// 64-bit guest code (hand-assembled); every `out` records AL at port 0x500:
//   mov ebx,0xFFC00000; mov ecx,0xFFE00000; mov dx,0x500
//   mov al,[rbx+0x10]; out            -> 0xAB (array, through the ROMD slot: no exit)
//   mov byte [rbx],0x70               -> MMIO write: read status, slot removed
//   mov al,[rbx]; out                 -> 0x80 (status, a read exit)
//   mov byte [rbx+0x10],0x10; mov byte [rbx+0x10],0x77; mov byte [rbx+0x10],0xFF
//   mov esi,kArrayReads; l: mov al,[rbx+0x10]; dec esi; jnz l; out
//                                     -> 0x77 (array again: the first kLazyRomdReads reads exit,
//                                        then the slot is mapped again and the rest are memory)
//   mov al,[rcx]; out                 -> 0xC3 (ROM)
//   mov byte [rcx],0x99               -> MMIO write exit, dropped
//   mov al,[rcx]; out                 -> 0xC3
//   mov dx,0x501; out                 -> done
const uint8_t kCode[] = {
    0xBB, 0x00,        0x00, 0xC0, 0xFF,                    //
    0xB9, 0x00,        0x00, 0xE0, 0xFF,                    //
    0x66, 0xBA,        0x00, 0x05,                          //
    0x8A, 0x43,        0x10, 0xEE,                          //
    0xC6, 0x03,        0x70,                                //
    0x8A, 0x03,        0xEE,                                //
    0xC6, 0x43,        0x10, 0x10,                          //
    0xC6, 0x43,        0x10, 0x77,                          //
    0xC6, 0x43,        0x10, 0xFF,                          //
    0xBE, kArrayReads, 0,    0,    0,                       //
    0x8A, 0x43,        0x10, 0xFF, 0xCE, 0x75, 0xF9, 0xEE,  //
    0x8A, 0x01,        0xEE,                                //
    0xC6, 0x01,        0x99,                                //
    0x8A, 0x01,        0xEE,                                //
    0x66, 0xBA,        0x01, 0x05, 0xEE,                    //
    0xEB, 0xFE,
};

std::vector<uint8_t> slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void run_guest(bool romd) {
  auto vm = TinyVm::create(kCode);
  if (!vm) GTEST_SKIP() << "/dev/kvm not available";
  TempDir dir("tern-pflash-kvm");
  std::string tmpl = dir.path() + "/VARS.fd", vars = dir.path() + "/vm.vars";
  std::vector<uint8_t> initial(kFlashSize, 0xFF);
  initial[0x10] = 0xAB;
  std::ofstream(tmpl, std::ios::binary)
      .write(reinterpret_cast<const char*>(initial.data()), kFlashSize);
  OvmfVarsSpec spec;
  spec.file = VarsFileSpec{vars, tmpl, 4096, 0};
  spec.end_gpa = kFlashGpa + kFlashSize;
  spec.slot = 1;
  spec.romd = romd;
  spec.quiet = std::chrono::hours(1);
  auto flash = create_ovmf_vars_flash(vm->kvm_vm(), spec);
  ASSERT_TRUE(flash) << flash.error().message();
  ASSERT_EQ((*flash)->gpa(), kFlashGpa);
  ASSERT_TRUE(vm->mmio.insert(*flash, (*flash)->gpa(), (*flash)->size()));

  std::vector<uint8_t> rom_bytes(2 * 4096, 0xC3);
  auto rom = RomRegion::from_bytes(rom_bytes, "test-rom");
  ASSERT_TRUE(rom) << rom.error().message();
  ASSERT_TRUE(rom->map(vm->kvm_vm(), 2, kRomGpa));
  auto sink = std::make_shared<RomWriteSink>(*rom, "firmware-code");
  ASSERT_TRUE(vm->mmio.insert(sink, kRomGpa, rom->size()));

  auto rec = std::make_shared<RecordingDevice>(vm->stop);
  ASSERT_TRUE(vm->pio.insert(rec, 0x500, 2));
  StopEvent e = vm->run();
  EXPECT_EQ(e.kind, StopKind::kPowerOff) << e.detail;
  EXPECT_EQ(rec->values, (std::vector<uint8_t>{0xAB, 0x80, 0x77, 0xC3, 0xC3}));
  EXPECT_EQ(sink->dropped_writes(), 1u);
  EXPECT_EQ(rom->bytes()[0], 0xC3);
  auto st = (*flash)->stats();
  EXPECT_EQ(st.flash.programs, 1u);
  // Writes always exit: 0x70, 0x10, 0x77, 0xFF to the flash and one to the ROM. With ROMD, reads
  // exit for the status and for the first kLazyRomdReads after the 0xFF; without, every read.
  const uint64_t writes = 5;
  EXPECT_EQ(vm->stats().get(KVM_EXIT_MMIO),
            writes + (romd ? 1 + PflashDevice::kLazyRomdReads : 2u + kArrayReads));
  // Mapped at creation, unmapped by 0x70, mapped after kLazyRomdReads array reads.
  EXPECT_EQ(st.romd_flips, romd ? 3u : 0u);
  ASSERT_TRUE((*flash)->flush());
  auto want = initial;
  want[0x10] = 0x77;
  EXPECT_EQ(slurp(vars), want);
}

TEST(PflashRomd, ReadsAreMemoryInReadArrayModeAndExitOtherwise) {
  run_guest(true);
}
TEST(PflashRomd, WithoutRomdEveryReadExits) {
  run_guest(false);
}

}  // namespace
}  // namespace tern::testing

namespace tern::testing {
namespace {

// Debian's OVMF 4M build: the store made from OVMF_VARS_4M.fd ends where OVMF_CODE_4M.fd starts
// (0xFFC84000), so it starts at 0xFFC00000, and OVMF's detection (QemuFlashDetected) finds flash.
TEST(PflashRomd, DebianOvmfVarsTemplateLandsAt0xFFC00000AndIsDetected) {
  const std::string tmpl = "/usr/share/OVMF/OVMF_VARS_4M.fd";
  if (::access(tmpl.c_str(), R_OK) != 0) GTEST_SKIP() << tmpl << " not installed";
  auto sys = KvmSystem::open();
  if (!sys) GTEST_SKIP() << "/dev/kvm not available";
  auto vm = sys->create_vm();
  ASSERT_TRUE(vm) << vm.error().message();
  TempDir dir("tern-pflash-ovmf");
  OvmfVarsSpec spec;
  spec.file = VarsFileSpec{dir.path() + "/vm.vars", tmpl, 4096, 0x400000 - 3653632};
  spec.end_gpa = 0xFFC84000;
  spec.slot = 1;
  auto flash = create_ovmf_vars_flash(*vm, spec);
  ASSERT_TRUE(flash) << flash.error().message();
  PflashDevice& d = **flash;
  EXPECT_EQ(d.gpa(), 0xFFC00000u);
  EXPECT_EQ(d.size(), 0x84000u);
  // QemuFlashDetected: the first byte of block 0 that is not 0x50, 0x70 or 0x00.
  uint64_t probe = 0;
  uint8_t b = 0;
  for (; probe < 4096; ++probe) {
    d.read(probe, std::span<uint8_t>(&b, 1));
    if (b != 0x50 && b != 0x70 && b != 0x00) break;
  }
  ASSERT_LT(probe, 4096u);
  const uint8_t original = b;
  auto w8 = [&](uint8_t v) { d.write(probe, std::span<const uint8_t>(&v, 1)); };
  auto r8 = [&] {
    uint8_t v = 0;
    d.read(probe, std::span<uint8_t>(&v, 1));
    return v;
  };
  w8(0x50);
  EXPECT_EQ(r8(), original);  // not "behaves as RAM"
  w8(0x70);
  EXPECT_EQ(r8(), 0x00);  // "FD behaves as FLASH"
  w8(0xFF);
  EXPECT_EQ(r8(), original);
  EXPECT_EQ(d.stats().flash.bad_sequences, 0u);
}

}  // namespace
}  // namespace tern::testing
