#include "devices/pci/msix_capability.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <vector>

#include "devices/pci/pci_registers.h"
#include "devices/testing/fake_pci_platform.h"

namespace tern {
namespace {

uint32_t rd(const PciConfigSpace& c, uint32_t off, size_t w) {
  uint8_t b[4] = {};
  c.read(off, std::span<uint8_t>(b, w));
  uint32_t v = 0;
  std::memcpy(&v, b, w);
  return v;
}
void wr(PciConfigSpace& c, uint32_t off, uint32_t v, size_t w) {
  c.write(off, std::span<const uint8_t>(reinterpret_cast<uint8_t*>(&v), w));
}

PciConfigSpace make_config() {
  PciConfigSpace c(PciIdentity{.vendor_id = 0x1b36, .device_id = 0x0010, .interrupt_pin = 1});
  c.declare_bar(PciBarDecl{.index = 0, .size = 0x4000, .is_64bit = true});
  c.declare_bar(PciBarDecl{.index = 2, .size = 0x1000});
  return c;
}

TEST(PciConfigSpaceTest, SixtyFourBitBarProbesAndDecodesAcrossBothRegisters) {
  PciConfigSpace c = make_config();
  c.apply_placement(PciPlacement{.bar_gpa = {0xC0004000, 0, 0xC0001000}, .intx_irq = 11});
  EXPECT_EQ(rd(c, pci::kBar0, 4), 0xC0004000u | pci::kBarMemory64);
  EXPECT_EQ(rd(c, pci::kBar0 + 4, 4), 0u);
  EXPECT_EQ(rd(c, pci::kInterruptLine, 1), 11u);
  EXPECT_EQ(rd(c, pci::kInterruptPin, 1), 1u);
  // Size probe (PCI 3.0 §6.2.5.1): all-ones into both halves reads back the size mask.
  wr(c, pci::kBar0, 0xFFFFFFFF, 4);
  wr(c, pci::kBar0 + 4, 0xFFFFFFFF, 4);
  EXPECT_EQ(rd(c, pci::kBar0, 4), (~0x3FFFu & pci::kBarMemoryMask) | pci::kBarMemory64);
  EXPECT_EQ(rd(c, pci::kBar0 + 4, 4), 0xFFFFFFFFu);
  // The guest moves it above 4 GiB.
  wr(c, pci::kBar0, 0x80000000, 4);
  wr(c, pci::kBar0 + 4, 0x1, 4);
  wr(c, pci::kCommand, pci::kCommandMemory, 2);
  EXPECT_EQ(c.bar_address(0), 0x180000000u);
  EXPECT_FALSE(c.bar_address(1));  // the upper half is not a BAR of its own
  auto w = c.memory_windows();
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].gpa, 0x180000000u);
  EXPECT_EQ(w[0].size, 0x4000u);
  EXPECT_EQ(w[1].gpa, 0xC0001000u);
  ASSERT_EQ(c.bar_declarations().size(), 2u);
  EXPECT_TRUE(c.bar_declarations()[0].is_64bit);
}

TEST(PciConfigSpaceTest, UnwiredIntxReadsNoPin) {
  PciConfigSpace c = make_config();
  c.apply_placement(PciPlacement{.bar_gpa = {0x4000, 0, 0x1000}, .intx_irq = 0xFF});
  EXPECT_EQ(rd(c, pci::kInterruptPin, 1), 0u);
  EXPECT_EQ(rd(c, pci::kInterruptLine, 1), 0xFFu);
}

TEST(MsixCapabilityTest, LayoutIsReadOnlyAndEnableMaskAreWritable) {
  PciConfigSpace c = make_config();
  auto cap = MsixCapability::add(
      c, MsixLayout{
             .vectors = 3, .table_bar = 2, .table_offset = 0, .pba_bar = 0, .pba_offset = 0x2000});
  const uint8_t at = cap.offset();
  ASSERT_NE(at, 0);
  EXPECT_EQ(rd(c, pci::kCapabilitiesPointer, 1), at);
  EXPECT_EQ(rd(c, at, 1), pci::kCapMsix);
  EXPECT_EQ(rd(c, at + pci::kMsixMessageControl, 2), 2u);  // N - 1
  EXPECT_EQ(rd(c, at + pci::kMsixTableOffsetBir, 4), 0u | 2u);
  EXPECT_EQ(rd(c, at + pci::kMsixPbaOffsetBir, 4), 0x2000u | 0u);
  wr(c, at + pci::kMsixMessageControl, 0xFFFF, 2);
  EXPECT_EQ(rd(c, at + pci::kMsixMessageControl, 2),
            2u | pci::kMsixControlEnable | pci::kMsixControlFunctionMask);
  wr(c, at + pci::kMsixTableOffsetBir, 0xFFFFFFFF, 4);
  wr(c, at + pci::kMsixPbaOffsetBir, 0xFFFFFFFF, 4);
  EXPECT_EQ(rd(c, at + pci::kMsixTableOffsetBir, 4), 2u);
  EXPECT_EQ(rd(c, at + pci::kMsixPbaOffsetBir, 4), 0x2000u);
  EXPECT_TRUE(cap.enabled(c));
  EXPECT_TRUE(cap.function_masked(c));
}

TEST(MsixCapabilityTest, BarAccessesReachTableAndPbaOnlyInTheirBars) {
  FakePciPlatform platform;
  auto table = MsixTable::create(3, platform).value();
  PciConfigSpace c = make_config();
  auto cap = MsixCapability::add(
      c,
      MsixLayout{
          .vectors = 3, .table_bar = 2, .table_offset = 0x10, .pba_bar = 0, .pba_offset = 0x2000});
  wr(c, cap.offset() + pci::kMsixMessageControl, pci::kMsixControlEnable, 2);
  cap.sync(c, *table);
  EXPECT_TRUE(table->enabled());
  uint32_t data = 0x41;
  EXPECT_TRUE(cap.bar_write(*table, 2, 0x10 + 16 + 8,
                            std::span<const uint8_t>(reinterpret_cast<uint8_t*>(&data), 4)));
  uint32_t back = 0;
  EXPECT_TRUE(cap.bar_read(*table, 2, 0x10 + 16 + 8,
                           std::span<uint8_t>(reinterpret_cast<uint8_t*>(&back), 4)));
  EXPECT_EQ(back, 0x41u);
  // Outside the table, in another BAR, or into the PBA: not handled by the table.
  EXPECT_FALSE(cap.bar_write(*table, 2, 0x8,
                             std::span<const uint8_t>(reinterpret_cast<uint8_t*>(&data), 4)));
  EXPECT_FALSE(cap.bar_write(*table, 0, 0x10,
                             std::span<const uint8_t>(reinterpret_cast<uint8_t*>(&data), 4)));
  EXPECT_FALSE(cap.bar_write(*table, 0, 0x2000,
                             std::span<const uint8_t>(reinterpret_cast<uint8_t*>(&data), 4)));
  uint64_t pba = ~0ull;
  EXPECT_TRUE(
      cap.bar_read(*table, 0, 0x2000, std::span<uint8_t>(reinterpret_cast<uint8_t*>(&pba), 8)));
  EXPECT_EQ(pba, 0u);
  EXPECT_FALSE(
      cap.bar_read(*table, 2, 0x2000, std::span<uint8_t>(reinterpret_cast<uint8_t*>(&pba), 8)));
}

// The mask notifier behind vhost's direct irqfd (QEMU's guest notifier mask): told the state
// at once, then each change of the vector's deliverability (vector mask bit, Enable, Function
// Mask, reset), after the Pending bit was sent; the route exists whenever it says deliverable.
TEST(MsixTableTest, MaskNotifierFollowsVectorFunctionMaskAndEnable) {
  FakePciPlatform platform;
  auto table = MsixTable::create(2, platform).value();
  std::vector<bool> told;
  uint64_t id = table->add_mask_notifier(1, [&](bool deliverable) { told.push_back(deliverable); });
  ASSERT_NE(id, 0u);
  EXPECT_EQ(told, std::vector<bool>{false});  // reset state: masked, MSI-X disabled
  EXPECT_EQ(table->add_mask_notifier(2, [](bool) {}), 0u);  // no such vector
  table->set_control(true, false);
  EXPECT_EQ(told.size(), 1u);  // still masked
  uint32_t ctrl = 0;  // unmask vector 1 (its Vector Control word, offset 12)
  table->table_write(16 + 12, std::span<const uint8_t>(reinterpret_cast<uint8_t*>(&ctrl), 4));
  EXPECT_EQ(told, (std::vector<bool>{false, true}));
  EXPECT_EQ(platform.routes.count(table->gsi(1)), 1u) << "deliverable without an MSI route";
  table->table_write(16 + 8, std::span<const uint8_t>(reinterpret_cast<uint8_t*>(&ctrl), 4));
  EXPECT_EQ(told.size(), 2u) << "a data write is not a state change";
  table->table_write(0 + 12, std::span<const uint8_t>(reinterpret_cast<uint8_t*>(&ctrl), 4));
  EXPECT_EQ(told.size(), 2u) << "another vector's change is not told";
  table->set_control(true, true);  // Function Mask
  table->set_control(true, false);
  table->set_control(false, false);  // MSI-X disabled
  table->set_control(true, false);
  ctrl = pci::kMsixVectorMasked;
  table->table_write(16 + 12, std::span<const uint8_t>(reinterpret_cast<uint8_t*>(&ctrl), 4));
  EXPECT_EQ(told, (std::vector<bool>{false, true, false, true, false, true, false}));
  // Masked: a fire sets the Pending bit; the unmask sends it before telling the notifier.
  EXPECT_TRUE(table->fire(1));
  EXPECT_TRUE(table->pending(1));
  uint64_t count = 0;
  ctrl = 0;
  table->table_write(16 + 12, std::span<const uint8_t>(reinterpret_cast<uint8_t*>(&ctrl), 4));
  EXPECT_EQ(told.back(), true);
  EXPECT_FALSE(table->pending(1));
  EXPECT_EQ(::read(table->irqfd(1).get(), &count, sizeof count), 8);
  table->reset();
  EXPECT_EQ(told.back(), false);
  table->remove_mask_notifier(id);
  size_t before = told.size();
  table->set_control(true, false);
  table->table_write(16 + 12, std::span<const uint8_t>(reinterpret_cast<uint8_t*>(&ctrl), 4));
  EXPECT_EQ(told.size(), before) << "a removed notifier ran";
}

}  // namespace
}  // namespace tern
