// kvm tests: guest RAM on the memfd backend runs a guest, and a second mapping of the region's
// fd — what a vhost-user back-end makes — shares memory with it both ways.
#include <sys/mman.h>

#include <gtest/gtest.h>

#include <cstring>

#include "tests/kvm/tiny_vm.h"

namespace tern::testing {
namespace {

constexpr uint64_t kIn = 0x180000;   // written by the "back-end" before the run
constexpr uint64_t kOut = 0x180004;  // written by the guest: kIn's value + 1

// 64-bit guest code (hand-assembled):
//   mov eax,[0x180000]; add eax,1; mov [0x180004],eax
//   mov dx,0x501; out dx,al                      -> recorder "done"
//   jmp $
const uint8_t kCode[] = {
    0x8B, 0x04, 0x25, 0x00, 0x00, 0x18, 0x00,  //
    0x83, 0xC0, 0x01,                          //
    0x89, 0x04, 0x25, 0x04, 0x00, 0x18, 0x00,  //
    0x66, 0xBA, 0x01, 0x05, 0xEE,              //
    0xEB, 0xFE,
};

TEST(SharedMemoryKvm, GuestOnMemfdSharesRamWithASecondMapping) {
  auto vm = TinyVm::create(kCode, MemoryBackend::kMemfd);
  if (!vm) GTEST_SKIP() << "/dev/kvm not available";
  ASSERT_TRUE(vm->memory().shareable());
  const MemoryRegion& r = vm->memory().regions()[0];
  auto* peer = static_cast<uint8_t*>(
      ::mmap(nullptr, r.size, PROT_READ | PROT_WRITE, MAP_SHARED, r.fd, 0));
  ASSERT_NE(peer, MAP_FAILED) << std::strerror(errno);
  uint32_t in = 41;
  std::memcpy(peer + kIn, &in, sizeof in);
  auto rec = std::make_shared<RecordingDevice>(vm->stop);
  ASSERT_TRUE(vm->pio.insert(rec, 0x500, 2));
  StopEvent e = vm->run();
  EXPECT_EQ(e.kind, StopKind::kPowerOff) << e.detail;
  uint32_t out = 0;
  std::memcpy(&out, peer + kOut, sizeof out);
  EXPECT_EQ(out, 42u);
  ::munmap(peer, r.size);
}

}  // namespace
}  // namespace tern::testing
