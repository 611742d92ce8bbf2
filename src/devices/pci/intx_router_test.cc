#include "devices/pci/intx_router.h"

#include <gtest/gtest.h>

#include "devices/testing/fake_pci_platform.h"

namespace tern {
namespace {

TEST(IntxRouterTest, SharedIrqStaysAssertedWhileAnySourceAsserts) {
  FakePciPlatform platform;
  IntxRouter router(platform);
  auto a = router.source();
  auto b = router.source();
  a->set_irq_level(10, true);
  EXPECT_TRUE(platform.levels[10]);
  b->set_irq_level(10, true);
  a->set_irq_level(10, false);  // b still asserts: the line stays high
  EXPECT_TRUE(platform.levels[10]);
  EXPECT_TRUE(router.level(10));
  b->set_irq_level(10, false);
  EXPECT_FALSE(platform.levels[10]);
  EXPECT_FALSE(router.level(10));
  // Without the router, the same sequence would have ended with a lowered line under b's
  // pending interrupt: high, high, low, low.
  EXPECT_EQ(platform.level_changes, (std::vector<bool>{true, true, false}));
}

TEST(IntxRouterTest, IrqsAreIndependentAndUnwiredIsIgnored) {
  FakePciPlatform platform;
  IntxRouter router(platform);
  auto a = router.source();
  auto b = router.source();
  a->set_irq_level(10, true);
  b->set_irq_level(11, true);
  b->set_irq_level(11, false);
  EXPECT_TRUE(platform.levels[10]);
  EXPECT_FALSE(platform.levels[11]);
  a->set_irq_level(0xFF, true);  // INTx not wired
  EXPECT_EQ(platform.levels.count(0xFF), 0u);
}

TEST(IntxRouterTest, MsiAndIoeventfdPassThrough) {
  FakePciPlatform platform;
  IntxRouter router(platform);
  auto a = router.source();
  EXPECT_EQ(*a->allocate_msi(BorrowedFd(-1)), 24u);
  ASSERT_TRUE(a->set_msi_route(24, 0xFEE00000, 0x41));
  EXPECT_EQ(platform.routes[24].data, 0x41u);
  ASSERT_TRUE(a->set_ioeventfd(0xC0000000, 2, BorrowedFd(-1), true));
  EXPECT_EQ(platform.ioeventfds.count(0xC0000000), 1u);
}

}  // namespace
}  // namespace tern
