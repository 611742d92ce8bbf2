#include "arch/x86/acpi.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "arch/x86/acpi_dsdt.h"
#include "arch/x86/checksum.h"
#include "arch/x86/layout.h"
#include "arch/x86/reset_vector.h"

namespace tern::x86 {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

/// The first MiB of guest RAM in a plain buffer, read back with raw spec offsets.
struct LowMem {
  LowMem() : bytes(kBiosEnd, 0) {}
  GuestMemory mem() { return GuestMemory::wrap({MemoryRegion{0, bytes.size(), bytes.data(), 0}}); }
  template <class T>
  T get(uint64_t gpa) const {
    T v;
    std::memcpy(&v, &bytes[gpa], sizeof v);
    return v;
  }
  std::string str(uint64_t gpa, size_t n) const {
    return {reinterpret_cast<const char*>(&bytes[gpa]), n};
  }
  std::span<const uint8_t> span(uint64_t gpa, size_t n) const { return {&bytes[gpa], n}; }
  std::vector<uint8_t> bytes;
};

/// ACPICA's acpi_find_root_pointer(): "RSD PTR " on a 16-byte boundary in 0xE0000..0xFFFFF with
/// a valid checksum (20 bytes) and, for revision >= 2, extended checksum (length bytes).
uint64_t scan_for_rsdp(const LowMem& m) {
  for (uint64_t a = 0xE0000; a < 0x100000; a += 16) {
    if (m.str(a, 8) != "RSD PTR " || byte_sum(m.span(a, 20)) != 0) continue;
    if (m.bytes[a + 15] >= 2 && byte_sum(m.span(a, m.get<uint32_t>(a + 20))) != 0) continue;
    return a;
  }
  return 0;
}

/// Checks a table's header at `gpa` and returns its length.
uint32_t check_table(const LowMem& m, uint64_t gpa, const std::string& sig) {
  EXPECT_EQ(m.str(gpa, 4), sig);
  const uint32_t len = m.get<uint32_t>(gpa + 4);
  EXPECT_EQ(byte_sum(m.span(gpa, len)), 0) << sig << " checksum";
  EXPECT_EQ(m.str(gpa + 10, 6), "TERN  ") << sig << " OEM ID";
  EXPECT_LE(gpa + len, kBiosEnd);
  return len;
}

struct Tables {
  uint64_t rsdp = 0;
  std::map<std::string, uint64_t> by_sig;  // from the XSDT, plus the DSDT from the FADT
};

Tables walk(const LowMem& m) {
  Tables t;
  t.rsdp = scan_for_rsdp(m);
  if (t.rsdp == 0) return t;
  const uint64_t xsdt = m.get<uint64_t>(t.rsdp + 24);
  const uint32_t len = check_table(m, xsdt, "XSDT");
  for (uint64_t p = xsdt + 36; p < xsdt + len; p += 8) {
    uint64_t table = m.get<uint64_t>(p);
    t.by_sig[m.str(table, 4)] = table;
  }
  if (t.by_sig.count("FACP")) t.by_sig["DSDT"] = m.get<uint64_t>(t.by_sig["FACP"] + 140);
  return t;
}

TEST(Acpi, RsdpIsFoundByTheGuestScan) {
  LowMem m;
  auto mem = m.mem();
  auto info = write_acpi_tables(mem, 2);
  ASSERT_TRUE(info) << info.error().message();
  auto t = walk(m);
  ASSERT_EQ(t.rsdp, kAcpiStart);
  EXPECT_EQ(t.rsdp % 16, 0u);
  EXPECT_EQ(m.bytes[t.rsdp + 15], 2);            // revision
  EXPECT_EQ(m.get<uint32_t>(t.rsdp + 16), 0u);   // no RSDT
  EXPECT_EQ(m.get<uint32_t>(t.rsdp + 20), 36u);  // length
  EXPECT_EQ(m.get<uint64_t>(t.rsdp + 24), info->xsdt);
  EXPECT_EQ(m.str(t.rsdp + 9, 6), "TERN  ");
  EXPECT_EQ(t.by_sig.size(), 3u);  // FACP, APIC (from the XSDT), DSDT (from the FADT)
  EXPECT_EQ(t.by_sig["FACP"], info->fadt);
  EXPECT_EQ(t.by_sig["APIC"], info->madt);
  EXPECT_EQ(t.by_sig["DSDT"], info->dsdt);
  EXPECT_LT(info->end, kBiosEnd);
}

TEST(Acpi, FadtFieldsAtSpecOffsets) {
  LowMem m;
  auto mem = m.mem();
  ASSERT_TRUE(write_acpi_tables(mem, 1));
  const uint64_t f = walk(m).by_sig["FACP"];
  ASSERT_NE(f, 0u);
  EXPECT_EQ(check_table(m, f, "FACP"), 276u);
  EXPECT_EQ(m.bytes[f + 8], 6);                              // revision
  EXPECT_EQ(m.get<uint16_t>(f + 46), kAcpiSciIrq);           // SCI_INT
  EXPECT_EQ(m.get<uint32_t>(f + 48), 0u);                    // SMI_CMD: none, always in ACPI mode
  EXPECT_EQ(m.get<uint32_t>(f + 56), kAcpiPm1aEvtPort);      // PM1a_EVT_BLK
  EXPECT_EQ(m.get<uint32_t>(f + 64), kAcpiPm1aCntPort);      // PM1a_CNT_BLK
  EXPECT_EQ(m.bytes[f + 88], 4);                             // PM1_EVT_LEN
  EXPECT_EQ(m.bytes[f + 89], 2);                             // PM1_CNT_LEN
  EXPECT_EQ(m.get<uint16_t>(f + 109), (1 << 1) | (1 << 2));  // IAPC_BOOT_ARCH: 8042, no VGA
  const uint32_t flags = m.get<uint32_t>(f + 112);
  EXPECT_EQ(flags & (1u << 20), 0u);  // not HW_REDUCED_ACPI: Linux keeps the legacy PIC
  EXPECT_NE(flags & (1u << 10), 0u);  // RESET_REG_SUP
  // RESET_REG: SystemIO, 8 bits, offset 0, byte access, kAcpiResetPort.
  EXPECT_THAT(std::vector<uint8_t>(&m.bytes[f + 116], &m.bytes[f + 120]), ElementsAre(1, 8, 0, 1));
  EXPECT_EQ(m.get<uint64_t>(f + 120), kAcpiResetPort);
  EXPECT_EQ(m.bytes[f + 128], kAcpiResetValue);
  EXPECT_EQ(m.get<uint64_t>(f + 140), walk(m).by_sig["DSDT"]);   // X_DSDT
  EXPECT_EQ(m.get<uint32_t>(f + 40), m.get<uint64_t>(f + 140));  // DSDT, same table
  // X_PM1a_EVT_BLK / X_PM1a_CNT_BLK: SystemIO, 32 / 16 bits, word access.
  EXPECT_THAT(std::vector<uint8_t>(&m.bytes[f + 148], &m.bytes[f + 152]), ElementsAre(1, 32, 0, 2));
  EXPECT_EQ(m.get<uint64_t>(f + 152), kAcpiPm1aEvtPort);
  EXPECT_THAT(std::vector<uint8_t>(&m.bytes[f + 172], &m.bytes[f + 176]), ElementsAre(1, 16, 0, 2));
  EXPECT_EQ(m.get<uint64_t>(f + 176), kAcpiPm1aCntPort);
  // X_FIRMWARE_CTRL: a 64-byte FACS, 64-byte aligned.
  const uint64_t facs = m.get<uint64_t>(f + 132);
  EXPECT_EQ(facs % 64, 0u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(&m.bytes[facs]), 4), "FACS");
  EXPECT_EQ(m.get<uint32_t>(facs + 4), 64u);
  EXPECT_EQ(m.get<uint32_t>(f + 36), 0u);  // FIRMWARE_CTRL unused
}

TEST(Acpi, DsdtDefinesS5) {
  LowMem m;
  auto mem = m.mem();
  ASSERT_TRUE(write_acpi_tables(mem, 1));
  const uint64_t d = walk(m).by_sig["DSDT"];
  ASSERT_NE(d, 0u);
  const uint32_t len = check_table(m, d, "DSDT");
  ASSERT_EQ(kAcpiS5SleepType, 5);
  // Name(_S5_, Package(){5, 0, 0, 0}):
  //   NameOp '_S5_' PackageOp PkgLength(7 = itself + NumElements + 5 element bytes)
  //   NumElements(4) BytePrefix 5, ZeroOp, ZeroOp, ZeroOp
  EXPECT_THAT(
      std::vector<uint8_t>(&m.bytes[d + 36], &m.bytes[d + 36 + 13]),
      ElementsAre(0x08, '_', 'S', '5', '_', 0x12, 0x07, 0x04, 0x0A, 0x05, 0x00, 0x00, 0x00));
  // Then the PCI host bridge, to the end of the table.
  const auto pci =
      acpi::aml_pci_root(static_cast<uint32_t>(kPciMmioStart), static_cast<uint32_t>(kPciMmioEnd));
  EXPECT_EQ(std::vector<uint8_t>(&m.bytes[d + 36 + 13], &m.bytes[d + len]), pci);
}

TEST(Acpi, PciRootDeviceAml) {
  const auto a = acpi::aml_pci_root(0xC0000000, 0xFEC00000);
  // DeviceOp, two-byte PkgLength covering everything after the opcode, \_SB_.PCI0.
  ASSERT_GT(a.size(), 20u);
  EXPECT_EQ(a[0], 0x5B);
  EXPECT_EQ(a[1], 0x82);
  EXPECT_EQ(a[2] & 0xC0, 0x40);
  EXPECT_EQ(((a[2] & 0x0F) | a[3] << 4), static_cast<int>(a.size() - 2));
  EXPECT_THAT(std::vector<uint8_t>(a.begin() + 4, a.begin() + 14),
              ElementsAre(0x5C, 0x2E, '_', 'S', 'B', '_', 'P', 'C', 'I', '0'));
  // _HID EisaId("PNP0A03").
  EXPECT_THAT(std::vector<uint8_t>(a.begin() + 14, a.begin() + 24),
              ElementsAre(0x08, '_', 'H', 'I', 'D', 0x0C, 0x41, 0xD0, 0x0A, 0x03));
  // The _CRS buffer ends with the End Tag; the DWordMemory descriptor holds the window.
  EXPECT_EQ(a[a.size() - 2], 0x79);
  const std::vector<uint8_t> window_min = {0x00, 0x00, 0x00, 0xC0, 0xFF, 0xFF, 0xBF, 0xFE};
  EXPECT_NE(std::search(a.begin(), a.end(), window_min.begin(), window_min.end()), a.end());
}

TEST(Acpi, AmlIntegerEncodings) {
  EXPECT_THAT(acpi::aml_s5_package(0),
              ElementsAre(0x08, '_', 'S', '5', '_', 0x12, 0x06, 0x04, 0x00, 0x00, 0x00, 0x00));
  EXPECT_THAT(acpi::aml_s5_package(1),
              ElementsAre(0x08, '_', 'S', '5', '_', 0x12, 0x06, 0x04, 0x01, 0x00, 0x00, 0x00));
  EXPECT_THAT(acpi::aml_s5_package(7), ElementsAre(0x08, '_', 'S', '5', '_', 0x12, 0x07, 0x04, 0x0A,
                                                   0x07, 0x00, 0x00, 0x00));
}

void check_madt(uint32_t n) {
  SCOPED_TRACE(n);
  LowMem m;
  auto mem = m.mem();
  auto info = write_acpi_tables(mem, n);
  ASSERT_TRUE(info) << info.error().message();
  EXPECT_LT(info->end, kBiosEnd);
  const uint64_t a = walk(m).by_sig["APIC"];
  ASSERT_NE(a, 0u);
  const uint32_t len = check_table(m, a, "APIC");
  EXPECT_EQ(m.get<uint32_t>(a + 36), kLapicAddr);
  EXPECT_EQ(m.get<uint32_t>(a + 40), 1u);  // PCAT_COMPAT
  uint32_t lapics = 0, ioapics = 0;
  for (uint64_t p = a + 44; p < a + len; p += m.bytes[p + 1]) {
    ASSERT_GT(m.bytes[p + 1], 0);
    switch (m.bytes[p]) {
      case 0:
        EXPECT_EQ(m.bytes[p + 1], 8);
        EXPECT_EQ(m.bytes[p + 2], lapics);      // ACPI processor UID
        EXPECT_EQ(m.bytes[p + 3], lapics);      // APIC ID
        EXPECT_EQ(m.get<uint32_t>(p + 4), 1u);  // enabled
        ++lapics;
        break;
      case 1:
        EXPECT_EQ(m.bytes[p + 1], 12);
        EXPECT_EQ(m.bytes[p + 2], n);
        EXPECT_EQ(m.get<uint32_t>(p + 4), kIoapicAddr);
        EXPECT_EQ(m.get<uint32_t>(p + 8), 0u);  // GSI base
        ++ioapics;
        break;
      default:
        ADD_FAILURE() << "unexpected MADT entry type " << int{m.bytes[p]};
    }
  }
  EXPECT_EQ(lapics, n);
  EXPECT_EQ(ioapics, 1u);
}

TEST(Acpi, MadtOneVcpu) {
  check_madt(1);
}
TEST(Acpi, MadtManyVcpus) {
  check_madt(64);
}
TEST(Acpi, MadtMaxVcpus) {
  check_madt(kAcpiMaxVcpus);
}

TEST(Acpi, RejectsBadVcpuCountsWithoutWriting) {
  LowMem m;
  auto mem = m.mem();
  auto r = write_acpi_tables(mem, kAcpiMaxVcpus + 1);
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message(), HasSubstr("255 vCPUs"));
  EXPECT_FALSE(write_acpi_tables(mem, 0));
  for (uint8_t b : m.bytes) ASSERT_EQ(b, 0);
}

TEST(Acpi, WritesTheResetVectorStub) {
  LowMem m;
  auto mem = m.mem();
  ASSERT_TRUE(write_acpi_tables(mem, kAcpiMaxVcpus));
  // F000:FFF0: mov al, 0x01; mov dx, 0x0606; out dx, al; hlt; jmp -3 (to the hlt).
  ASSERT_EQ(kAcpiResetValue, 0x01);
  ASSERT_EQ(kAcpiResetPort, 0x606);
  EXPECT_THAT(std::vector<uint8_t>(&m.bytes[0xFFFF0], &m.bytes[0xFFFF9]),
              ElementsAre(0xB0, 0x01, 0xBA, 0x06, 0x06, 0xEE, 0xF4, 0xEB, 0xFD));
  EXPECT_EQ(reset_vector_stub().size(), 9u);
}

TEST(Acpi, FailsWhenTheAreaIsNotRam) {
  std::vector<uint8_t> small(0x10000);
  auto mem = GuestMemory::wrap({MemoryRegion{0, small.size(), small.data(), 0}});
  auto r = write_acpi_tables(mem, 1);
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message(), HasSubstr("ACPI tables"));
}

/// The direct-boot tables are byte-for-byte what tern wrote before the image builder was split
/// out for fw_cfg (CRC-32 of [kAcpiStart, end) recorded from that version).
TEST(Acpi, DirectBootBytesUnchanged) {
  const std::map<uint32_t, uint32_t> want = {
      {1, 3731196133u}, {2, 2008781053u}, {7, 2051862688u}, {254, 3285918473u}};
  for (auto [vcpus, crc] : want) {
    LowMem m;
    auto info = write_acpi_tables(m.mem(), vcpus);
    ASSERT_TRUE(info.has_value());
    auto bytes = m.span(kAcpiStart, info->end - kAcpiStart);
    EXPECT_EQ(crc32(0, bytes.data(), static_cast<uInt>(bytes.size())), crc) << vcpus << " vCPUs";
  }
}

}  // namespace
}  // namespace tern::x86
