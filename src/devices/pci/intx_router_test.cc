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

TEST(IntxRouterTest, SnapshotKeepsEachSourcesLevel) {
  FakePciPlatform platform;
  IntxRouter a(platform);
  auto a0 = a.source();
  auto a1 = a.source();
  a0->set_irq_level(11, true);
  a1->set_irq_level(11, true);
  snap::ByteWriter w;
  a.save_state(w);

  FakePciPlatform restored_platform;
  IntxRouter b(restored_platform);
  auto b0 = b.source();
  auto b1 = b.source();
  snap::ByteReader r(w.data(), "test");
  ASSERT_TRUE(b.restore_state(r));
  EXPECT_TRUE(restored_platform.level_changes.empty());  // adopted, not driven
  b0->set_irq_level(11, false);                          // b1 still asserts: no lower
  EXPECT_TRUE(restored_platform.level_changes.empty());
  b1->set_irq_level(11, false);
  EXPECT_EQ(restored_platform.level_changes, (std::vector<bool>{false}));

  IntxRouter c(restored_platform);  // no sources
  snap::ByteReader r2(w.data(), "test");
  auto res = c.restore_state(r2);
  ASSERT_FALSE(res);
  EXPECT_NE(res.error().message().find("intx-router"), std::string::npos);
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

// Malformed section bytes are refused naming the router, and a refused restore changes nothing.
TEST(IntxRouterTest, RestoreRefusesMalformedBytes) {
  FakePciPlatform platform;
  IntxRouter a(platform);
  auto a0 = a.source();
  auto a1 = a.source();
  a1->set_irq_level(10, true);
  snap::ByteWriter w;
  a.save_state(w);
  const std::vector<uint8_t> good = w.data();

  FakePciPlatform p2;
  IntxRouter b(p2);
  auto b0 = b.source();
  auto b1 = b.source();
  auto refused = [&](const std::vector<uint8_t>& bytes, const std::string& want) {
    snap::ByteReader r(bytes, "test");
    auto res = b.restore_state(r);
    ASSERT_FALSE(res);
    EXPECT_NE(res.error().message().find("intx-router"), std::string::npos);
    EXPECT_NE(res.error().message().find(want), std::string::npos) << res.error().message();
    EXPECT_FALSE(b.level(10));  // unchanged
  };
  for (size_t n = 0; n < good.size(); ++n)
    refused(std::vector<uint8_t>(good.begin(), good.begin() + static_cast<ptrdiff_t>(n)),
            "truncated");
  auto bad = good;
  bad[0] = 2;  // version
  refused(bad, "version");
  bad = good;
  bad[8 + 10 * 8] |= 4;  // IRQ 10: source 2, which does not exist
  refused(bad, "a source that does not exist");
  snap::ByteReader r(good, "test");
  ASSERT_TRUE(b.restore_state(r));
  EXPECT_TRUE(b.level(10));
}

}  // namespace
}  // namespace tern
