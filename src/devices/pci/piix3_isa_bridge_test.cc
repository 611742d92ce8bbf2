#include "devices/pci/piix3_isa_bridge.h"

#include <gtest/gtest.h>

#include <vector>

#include "devices/pci/testing/pc_chipset_rig.h"

namespace tern {
namespace {

using testing::cfg_read8;
using testing::cfg_write8;

TEST(Piix3IsaBridgeTest, PirqRouteControlRegisters) {
  struct Route {
    unsigned pirq;
    std::optional<uint8_t> irq;
  };
  std::vector<Route> routes;
  Piix3IsaBridge b([&](unsigned p, std::optional<uint8_t> irq) { routes.push_back({p, irq}); });
  for (unsigned i = 0; i < 4; ++i) {
    EXPECT_EQ(cfg_read8(b, 0x60 + i), 0x80) << i;
    EXPECT_EQ(b.pirq_irq(i), std::nullopt);
  }
  EXPECT_EQ(cfg_read8(b, 0x0E), 0x80);  // multi-function header
  cfg_write8(b, 0x61, 0xFB);            // reserved bits 6:4 dropped, still disabled
  EXPECT_EQ(cfg_read8(b, 0x61), 0x8B);
  EXPECT_TRUE(routes.empty());
  cfg_write8(b, 0x61, 0x0B);
  EXPECT_EQ(b.pirq_irq(1), 11);
  ASSERT_EQ(routes.size(), 1u);
  EXPECT_EQ(routes[0].pirq, 1u);
  EXPECT_EQ(routes[0].irq, 11);
  cfg_write8(b, 0x62, 0x02);  // IRQ 2 is reserved: no route
  EXPECT_EQ(b.pirq_irq(2), std::nullopt);
  EXPECT_EQ(routes.size(), 1u);
  cfg_write8(b, 0x61, 0x8B);
  ASSERT_EQ(routes.size(), 2u);
  EXPECT_EQ(routes[1].irq, std::nullopt);
  // Every valid IRQ decodes; the reserved ones do not.
  for (uint8_t irq = 0; irq < 16; ++irq) {
    const bool valid = irq >= 3 && irq != 8 && irq != 13;
    EXPECT_EQ(Piix3IsaBridge::decode_route(irq).has_value(), valid) << +irq;
  }
  // Other device-specific registers are read-only 0.
  cfg_write8(b, 0x4E, 0xFF);
  cfg_write8(b, 0x64, 0xFF);
  EXPECT_EQ(cfg_read8(b, 0x4E), 0);
  EXPECT_EQ(cfg_read8(b, 0x64), 0);
}

TEST(Piix3IsaBridgeTest, ElcrReservedBitsReadZero) {
  Elcr e;
  uint8_t v[2] = {0xFF, 0xFF};
  e.write(0, v);
  uint8_t r[2] = {};
  e.read(0, r);
  EXPECT_EQ(r[0], 0xF8);  // IRQ 0, 1, 2 reserved
  EXPECT_EQ(r[1], 0xDE);  // IRQ 8, 13 reserved
  EXPECT_EQ(e.value(), 0xDEF8);
  // What SeaBIOS writes for PCI IRQs 10 and 11.
  uint8_t seabios[2] = {0x00, 0x0C};
  e.write(0, seabios);
  EXPECT_EQ(e.value(), 0x0C00);
  uint8_t one = 0;
  e.read(1, std::span<uint8_t>(&one, 1));
  EXPECT_EQ(one, 0x0C);
  e.reset();
  EXPECT_EQ(e.value(), 0);
}

TEST(Piix3IsaBridgeTest, ElcrRestoreRefusesReservedBits) {
  snap::ByteWriter w;
  w.u32(1);
  w.u8(0x01);
  w.u8(0x00);
  Elcr e;
  snap::ByteReader r(w.data(), "test");
  auto res = e.restore_state(r);
  ASSERT_FALSE(res);
  EXPECT_NE(res.error().message().find("elcr1"), std::string::npos);
}

TEST(Piix3IsaBridgeTest, ResetControl) {
  int resets = 0;
  ResetControl rc([&] { ++resets; });
  uint8_t v = 0x02;
  rc.write(0, std::span<const uint8_t>(&v, 1));
  EXPECT_EQ(resets, 0);
  EXPECT_EQ(rc.value(), 0x02);
  v = 0xFF;  // reserved bits are not stored
  rc.write(0, std::span<const uint8_t>(&v, 1));
  EXPECT_EQ(resets, 1);
  EXPECT_EQ(rc.value(), 0x02);
  uint8_t w2[2] = {0x06, 0x06};
  rc.write(0, w2);  // not a byte access
  EXPECT_EQ(resets, 1);
  rc.reset();
  EXPECT_EQ(rc.value(), 0);
}

}  // namespace
}  // namespace tern
