#include "firmware/fw_cfg/fw_cfg_contents.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "arch/x86/layout.h"

namespace tern::fw_cfg {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr uint64_t kGiB = uint64_t{1} << 30;

uint64_t le(const std::vector<uint8_t>& b, size_t at, size_t width) {
  uint64_t v = 0;
  for (size_t i = 0; i < width; ++i) v |= uint64_t{b.at(at + i)} << (8 * i);
  return v;
}

FwCfgMachine machine() {
  FwCfgMachine m;
  m.num_vcpus = 2;
  m.ram_bytes = 4 * kGiB;
  m.boot_order = {{BootDevice::Kind::kVirtioBlk, 3, 0}, {BootDevice::Kind::kNvme, 0x1a, 1}};
  return m;
}

TEST(FwCfgContents, NumberedItems) {
  auto items = build_fw_cfg_items(machine());
  ASSERT_TRUE(items.has_value()) << items.error().message();
  EXPECT_THAT(*items->find(kNbCpus), ElementsAre(2, 0));
  EXPECT_THAT(*items->find(kMaxCpus), ElementsAre(2, 0));
  EXPECT_THAT(*items->find(kNoGraphic), ElementsAre(1, 0));
  EXPECT_EQ(le(*items->find(kRamSize), 0, 8), 4 * kGiB);
  EXPECT_THAT(*items->find(kBootMenu), ElementsAre(0, 0));
}

TEST(FwCfgContents, Files) {
  auto items = build_fw_cfg_items(machine());
  ASSERT_TRUE(items.has_value());
  EXPECT_THAT(items->file_names(),
              ElementsAre("bootorder", "etc/acpi/rsdp", "etc/acpi/tables", "etc/boot-fail-wait",
                          "etc/e820", "etc/sercon-port", "etc/smbios/smbios-anchor",
                          "etc/smbios/smbios-tables", "etc/table-loader"));
  EXPECT_EQ(le(*items->file("etc/boot-fail-wait"), 0, 4), 5000u);
  EXPECT_EQ(items->file("etc/boot-fail-wait")->size(), 4u);
  EXPECT_THAT(*items->file("etc/sercon-port"), ElementsAre(0xF8, 0x03));
}

TEST(FwCfgContents, FadtResetRegisterIsPiix3ResetControl) {
  // The FADT in etc/acpi/tables names the PIIX3 Reset Control register (0xCF9) with a hard reset
  // (0x06), as QEMU's PC machine does, whatever the PM block's base: SeaBIOS and OVMF program
  // PMBASE, and PIIX4's PM block has no reset register (it once said PM base + 6, which nothing
  // decoded: Linux's reboot=acpi fell through to the keyboard controller).
  for (uint16_t pm_base : {uint16_t{0x600}, uint16_t{0xB000}}) {
    FwCfgMachine m = machine();
    m.acpi_pm_base = pm_base;
    auto items = build_fw_cfg_items(m);
    ASSERT_TRUE(items.has_value());
    const std::vector<uint8_t>& t = *items->file("etc/acpi/tables");
    const std::string_view bytes(reinterpret_cast<const char*>(t.data()), t.size());
    const size_t f = bytes.find("FACP");
    ASSERT_NE(f, std::string_view::npos);
    EXPECT_NE(le(t, f + 112, 4) & (1u << 10), 0u);  // flags: RESET_REG_SUP
    EXPECT_THAT(std::vector<uint8_t>(t.begin() + static_cast<ptrdiff_t>(f + 116),
                                     t.begin() + static_cast<ptrdiff_t>(f + 120)),
                ElementsAre(1, 8, 0, 1));  // RESET_REG: SystemIO, 8 bits, offset 0, byte access
    EXPECT_EQ(le(t, f + 120, 8), 0xCF9u);  // RESET_REG address
    EXPECT_EQ(t.at(f + 128), 0x06);        // RESET_VALUE: SYS_RST | RST_CPU
    EXPECT_EQ(le(t, f + 56, 4), pm_base);  // PM1a_EVT_BLK still follows the PM block
  }
}

TEST(FwCfgContents, E820IsTheRamAroundTheHole) {
  auto items = build_fw_cfg_items(machine());
  ASSERT_TRUE(items.has_value());
  const std::vector<uint8_t>& e = *items->file("etc/e820");
  ASSERT_EQ(e.size(), 2 * 20u);  // {le64 address, le64 length, le32 type}
  EXPECT_EQ(le(e, 0, 8), 0u);
  EXPECT_EQ(le(e, 8, 8), x86::kHoleStart);
  EXPECT_EQ(le(e, 16, 4), 1u);
  EXPECT_EQ(le(e, 20, 8), x86::kHoleEnd);
  EXPECT_EQ(le(e, 28, 8), 4 * kGiB - x86::kHoleStart);
  EXPECT_EQ(le(e, 36, 4), 1u);

  FwCfgMachine small = machine();
  small.ram_bytes = 512 << 20;
  EXPECT_EQ(firmware_e820(small.ram_bytes).size(), 1u);
}

TEST(FwCfgContents, BootOrderAsQemuWritesIt) {
  auto items = build_fw_cfg_items(machine());
  ASSERT_TRUE(items.has_value());
  const std::vector<uint8_t>& b = *items->file("bootorder");
  ASSERT_FALSE(b.empty());
  EXPECT_EQ(b.back(), 0) << "OVMF wants the NUL";
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(b.data())),
            "/pci@i0cf8/scsi@3/disk@0,0\n/pci@i0cf8/nvme@1a,1\nHALT");
  FwCfgMachine none = machine();
  none.boot_order.clear();
  auto no_order = build_fw_cfg_items(none);
  ASSERT_TRUE(no_order.has_value());
  EXPECT_EQ(no_order->file("bootorder"), nullptr);
}

TEST(FwCfgContents, OptionalFilesCanBeLeftOut) {
  FwCfgMachine m = machine();
  m.boot_fail_wait_ms = 0;
  m.serial_port = 0;
  m.max_vcpus = 8;
  auto items = build_fw_cfg_items(m);
  ASSERT_TRUE(items.has_value());
  EXPECT_EQ(items->file("etc/boot-fail-wait"), nullptr);
  EXPECT_EQ(items->file("etc/sercon-port"), nullptr);
  EXPECT_THAT(*items->find(kNoGraphic), ElementsAre(0, 0));
  EXPECT_THAT(*items->find(kMaxCpus), ElementsAre(8, 0));
}

TEST(FwCfgContents, RefusesBadMachinesNamingTheField) {
  auto expect_refused = [](FwCfgMachine m, std::string_view field) {
    auto r = build_fw_cfg_items(m);
    ASSERT_FALSE(r.has_value()) << field;
    EXPECT_THAT(r.error().message(), HasSubstr(std::string(field)));
  };
  FwCfgMachine m = machine();
  m.num_vcpus = 0;
  expect_refused(m, "num_vcpus");
  m = machine();
  m.max_vcpus = 1;
  expect_refused(m, "max_vcpus");
  m = machine();
  m.ram_bytes = 0;
  expect_refused(m, "ram_bytes");
  m = machine();
  m.boot_order[0].slot = 32;
  expect_refused(m, "boot_order");
}

}  // namespace
}  // namespace tern::fw_cfg
