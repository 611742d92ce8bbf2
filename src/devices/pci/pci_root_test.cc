#include "devices/pci/pci_root.h"

#include <gtest/gtest.h>

#include <cstring>

#include "devices/pci/pci_registers.h"

namespace tern {
namespace {

uint32_t port_read(PciRoot& r, uint64_t port, size_t width) {
  uint8_t b[4] = {};
  r.config_port()->read(port - pci::kConfigAddressPort, std::span<uint8_t>(b, width));
  uint32_t v = 0;
  std::memcpy(&v, b, width);
  return v;
}

void port_write(PciRoot& r, uint64_t port, uint32_t v, size_t width) {
  r.config_port()->write(port - pci::kConfigAddressPort,
                         std::span<const uint8_t>(reinterpret_cast<uint8_t*>(&v), width));
}

uint32_t address(uint8_t bus, uint8_t dev, uint8_t fn, uint8_t reg) {
  return pci::kConfigAddressEnable | bus << 16 | dev << 11 | fn << 8 | reg;
}

TEST(PciRootTest, ConfigMechanism1FindsTheHostBridge) {
  PciRoot root(0xC0000000, 0x10000000);
  port_write(root, 0xCF8, address(0, 0, 0, 0), 4);
  EXPECT_EQ(port_read(root, 0xCF8, 4), address(0, 0, 0, 0));
  EXPECT_EQ(port_read(root, 0xCFC, 4), 0x00081b36u);
  EXPECT_EQ(port_read(root, 0xCFE, 2), 0x0008u);
  port_write(root, 0xCF8, address(0, 0, 0, 8), 4);
  EXPECT_EQ(port_read(root, 0xCFC, 4) >> 8, 0x060000u);  // class: host bridge
  EXPECT_EQ(port_read(root, 0xCFF, 1), 0x06u);
}

TEST(PciRootTest, AbsentFunctionsAndDisabledCyclesReadAllOnes) {
  PciRoot root(0xC0000000, 0x10000000);
  port_write(root, 0xCF8, address(0, 5, 0, 0), 4);
  EXPECT_EQ(port_read(root, 0xCFC, 4), 0xFFFFFFFFu);
  port_write(root, 0xCF8, address(0, 0, 3, 0), 4);
  EXPECT_EQ(port_read(root, 0xCFC, 4), 0xFFFFFFFFu);
  port_write(root, 0xCF8, address(1, 0, 0, 0), 4);
  EXPECT_EQ(port_read(root, 0xCFC, 4), 0xFFFFFFFFu);
  port_write(root, 0xCF8, address(0, 0, 0, 0) & ~pci::kConfigAddressEnable, 4);
  EXPECT_EQ(port_read(root, 0xCFC, 4), 0xFFFFFFFFu);
  // Byte write to 0xCF9 (reset control) leaves the address alone.
  port_write(root, 0xCF8, address(0, 0, 0, 0), 4);
  port_write(root, 0xCF9, 0x06, 1);
  EXPECT_EQ(port_read(root, 0xCF8, 4), address(0, 0, 0, 0));
  // Host bridge IDs are read-only.
  port_write(root, 0xCFC, 0x12345678, 4);
  EXPECT_EQ(port_read(root, 0xCFC, 4), 0x00081b36u);
}

TEST(PciRootTest, MmioWindowAllocationIsAlignedAndBounded) {
  PciRoot root(0xC0000000, 0x10000);
  EXPECT_EQ(*root.allocate_mmio(0x1000), 0xC0000000u);
  EXPECT_EQ(*root.allocate_mmio(0x4000), 0xC0004000u);
  EXPECT_FALSE(root.allocate_mmio(0x10000));
  EXPECT_FALSE(root.allocate_mmio(0x3000));
  uint8_t b[4];
  root.mmio_window()->read(0x10, b);
  EXPECT_EQ(b[0], 0xFF);
  EXPECT_EQ(root.stray_mmio(), 1u);
}

}  // namespace
}  // namespace tern
