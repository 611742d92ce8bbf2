// kvm tests: the KVM plumbing virtio-pci relies on — a 16-bit guest store to an ioeventfd address
// signals the eventfd inside KVM (no MMIO exit); GSI routing with MSI routes on top of the irqchip
// defaults and an irqfd per GSI are accepted.
#include <gtest/gtest.h>
#include <linux/kvm.h>
#include <sys/eventfd.h>

#include "kvm/gsi_router.h"
#include "tests/kvm/tiny_vm.h"

namespace tern::testing {
namespace {

constexpr uint64_t kNotifyGpa = 0xC0003000;  // in the PCI window; identity-mapped by the boot tables

// 64-bit guest code (hand-assembled):
//   mov eax,0xC0003000; mov word [rax],0; mov word [rax],1   -> two ioeventfd signals
//   mov byte [rax+0x10],7                                    -> MMIO exit (no ioeventfd there)
//   mov dx,0x501; out dx,al                                  -> recorder "done"
//   jmp $
const uint8_t kCode[] = {
    0xB8, 0x00, 0x30, 0x00, 0xC0,              //
    0x66, 0xC7, 0x00, 0x00, 0x00,              //
    0x66, 0xC7, 0x00, 0x01, 0x00,              //
    0xC6, 0x40, 0x10, 0x07,                    //
    0x66, 0xBA, 0x01, 0x05, 0xEE,              //
    0xEB, 0xFE,
};

TEST(IoEventFd, SixteenBitStoreSignalsWithoutExit) {
  auto vm = TinyVm::create(kCode);
  if (!vm) GTEST_SKIP() << "/dev/kvm not available";
  auto done = std::make_shared<RecordingDevice>(vm->stop);
  ASSERT_TRUE(vm->pio.insert(done, 0x500, 2));
  auto mmio = std::make_shared<RecordingDevice>(vm->stop);
  ASSERT_TRUE(vm->mmio.insert(mmio, kNotifyGpa, 0x1000));
  auto efd = make_eventfd(0, EFD_NONBLOCK);
  ASSERT_TRUE(efd);
  auto r = vm->kvm_vm().set_ioeventfd(kNotifyGpa, 2, efd->borrow(), true);
  ASSERT_TRUE(r) << r.error().message();

  // Routing: irqchip defaults + two MSI routes; an irqfd on each.
  GsiRouter router(vm->kvm_vm());
  for (int i = 0; i < 2; ++i) {
    auto gsi = router.allocate();
    ASSERT_TRUE(gsi);
    EXPECT_EQ(*gsi, GsiRouter::kFirstMsiGsi + i);
    auto irqfd = make_eventfd(0, EFD_NONBLOCK);
    ASSERT_TRUE(irqfd);
    auto a = vm->kvm_vm().set_irqfd(irqfd->borrow(), *gsi, true);
    EXPECT_TRUE(a) << a.error().message();
    auto m = router.set_msi(*gsi, 0xFEE00000, 0x30 + i);
    EXPECT_TRUE(m) << m.error().message();
    EXPECT_TRUE(vm->kvm_vm().set_irqfd(irqfd->borrow(), *gsi, false));
  }
  EXPECT_EQ(router.table().size(), 16u * 2 + 8 + 2);

  StopEvent e = vm->run();
  EXPECT_EQ(e.kind, StopKind::kPowerOff) << e.detail;
  uint64_t count = 0;
  ASSERT_EQ(::read(efd->get(), &count, sizeof count), static_cast<ssize_t>(sizeof count));
  EXPECT_EQ(count, 2u);
  ASSERT_EQ(mmio->values.size(), 1u);  // only the byte store at +0x10 exited
  EXPECT_EQ(mmio->values[0], 7);
  EXPECT_EQ(vm->stats().get(KVM_EXIT_MMIO), 1u);
  EXPECT_TRUE(vm->kvm_vm().set_ioeventfd(kNotifyGpa, 2, efd->borrow(), false));
}

}  // namespace
}  // namespace tern::testing
