// The PC chipset as the firmware sees it: through configuration mechanism #1 and the PIO bus.
#include "devices/pci/pc_chipset.h"

#include <gtest/gtest.h>

#include "arch/x86/layout.h"
#include "devices/pci/testing/pc_chipset_rig.h"

namespace tern {
namespace {

using testing::PcChipsetRig;

TEST(PcChipsetTest, FunctionsAndIdentitiesAsQemuPc) {
  PcChipsetRig rig;
  EXPECT_EQ(rig.cfg_read(0, 0, 0x00, 4), 0x12378086u);  // i440FX PMC
  EXPECT_EQ(rig.cfg_read(0, 0, 0x08, 1), 0x02u);        // revision
  EXPECT_EQ(rig.cfg_read(0, 0, 0x08, 4) >> 8, 0x060000u);
  EXPECT_EQ(rig.cfg_read(0, 0, 0x0E, 1), 0x00u);        // single function
  // SeaBIOS's qemu_detect() wants QEMU's subsystem IDs on 00:00.0.
  EXPECT_EQ(rig.cfg_read(0, 0, 0x2C, 4), 0x11001af4u);
  EXPECT_EQ(rig.cfg_read(1, 0, 0x00, 4), 0x70008086u);  // PIIX3 ISA bridge
  EXPECT_EQ(rig.cfg_read(1, 0, 0x08, 4) >> 8, 0x060100u);
  EXPECT_EQ(rig.cfg_read(1, 0, 0x0E, 1), 0x80u);        // multi-function
  EXPECT_EQ(rig.cfg_read(1, 3, 0x00, 4), 0x71138086u);  // PIIX4 PM
  EXPECT_EQ(rig.cfg_read(1, 3, 0x08, 4), 0x06800003u);
  EXPECT_EQ(rig.cfg_read(1, 3, 0x3D, 1), 1u);  // INTA#
  for (uint8_t fn : {1, 2, 4, 5, 6, 7}) EXPECT_EQ(rig.cfg_read(1, fn, 0, 4), 0xFFFFFFFFu) << +fn;
  EXPECT_EQ(rig.cfg_read(2, 0, 0, 4), 0xFFFFFFFFu);
}

TEST(PcChipsetTest, DevicesAddedLaterStartAtSlotTwo) {
  PcChipsetRig rig;
  auto other = std::make_shared<I440fxHostBridge>();  // any PciDevice
  EXPECT_EQ(rig.root.next_free_slot(), 2u);
  EXPECT_EQ(*rig.root.add(other), 2u);
  EXPECT_EQ(rig.root.next_free_slot(), 3u);
  EXPECT_FALSE(rig.root.add_function(1, 3, other));  // taken
  EXPECT_FALSE(rig.root.add_function(0, 0, other));  // the host bridge's place
  EXPECT_FALSE(rig.root.add_function(3, 8, other));
}

TEST(PcChipsetTest, MultiFunctionBitComesFromTheRoot) {
  PciRoot root(0xC0000000, 0x10000000);
  auto f0 = std::make_shared<I440fxHostBridge>();
  ASSERT_TRUE(root.add_function(5, 0, f0));
  uint8_t ht = 0;
  root.config_read(5, 0, 0x0E, std::span<uint8_t>(&ht, 1));
  EXPECT_EQ(ht, 0x00);
  ASSERT_TRUE(root.add_function(5, 6, std::make_shared<I440fxHostBridge>()));
  root.config_read(5, 0, 0x0E, std::span<uint8_t>(&ht, 1));
  EXPECT_EQ(ht, 0x80);
  uint32_t dw = 0;
  root.config_read(5, 0, 0x0C, std::span<uint8_t>(reinterpret_cast<uint8_t*>(&dw), 4));
  EXPECT_EQ(dw >> 16 & 0xFF, 0x80u);
  root.config_read(5, 6, 0x00, std::span<uint8_t>(reinterpret_cast<uint8_t*>(&dw), 4));
  EXPECT_EQ(dw, 0x12378086u);
}

TEST(PcChipsetTest, ResetControlTakesByteAccessesAtCf9Only) {
  PcChipsetRig rig;
  rig.out(0xCF8, PcChipsetRig::address(1, 3, 0x40), 4);
  rig.out(0xCF9, 0x02, 1);  // SRST: no reset yet
  EXPECT_EQ(rig.resets, 0);
  EXPECT_EQ(rig.in(0xCF9, 1), 0x02u);
  EXPECT_EQ(rig.in(0xCF8, 4), PcChipsetRig::address(1, 3, 0x40));  // CONFIG_ADDRESS untouched
  rig.out(0xCF9, x86::kResetControlHardReset, 1);
  EXPECT_EQ(rig.resets, 1);
  EXPECT_EQ(rig.chipset->reset_control->reset_requests(), 1u);
  EXPECT_EQ(rig.in(0xCF9, 1), 0x02u);  // RCPU reads 0
  // A dword at 0xCF8 is CONFIG_ADDRESS even though its byte 1 has RCPU set.
  rig.out(0xCF8, 0x80000400, 4);
  EXPECT_EQ(rig.resets, 1);
  EXPECT_EQ(rig.in(0xCF8, 4), 0x80000400u);
  // Word accesses covering 0xCF9 reach neither.
  rig.out(0xCF8, 0x0404, 2);
  EXPECT_EQ(rig.resets, 1);
  EXPECT_EQ(rig.in(0xCF8, 2), 0xFFFFu);
  rig.out(0xCF9, 0x04, 1);  // soft reset: a reset all the same
  EXPECT_EQ(rig.resets, 2);
  EXPECT_EQ(rig.in(0xCF9, 1), 0x00u);
}

TEST(PcChipsetTest, RootWithoutChipsetKeepsCf9Empty) {
  PciRoot root(0xC0000000, 0x10000000);
  uint8_t b = 0;
  root.config_port()->write(1, std::span<const uint8_t>(&b, 1));
  root.config_port()->read(1, std::span<uint8_t>(&b, 1));
  EXPECT_EQ(b, 0xFF);
}

TEST(PcChipsetTest, PmBlockAnswersOnlyOncePmioseIsSet) {
  PcChipsetRig rig;
  const uint16_t tmr = x86::kPiix4PmTimerPort;
  rig.now_ns = 1'000'000'000;
  EXPECT_EQ(rig.in(tmr, 4), 0xFFFFFFFFu);
  EXPECT_EQ(rig.chipset->pm_io->misplaced_accesses(), 1u);
  // What SeaBIOS does: PMBA = base | 1, then PMREGMISC = 1.
  rig.cfg_write(1, 3, 0x40, x86::kPiix4PmBase | 1, 4);
  EXPECT_EQ(rig.in(tmr, 4), 0xFFFFFFFFu);  // PMIOSE still clear
  rig.cfg_write(1, 3, 0x80, 1, 1);
  EXPECT_EQ(rig.in(tmr, 4), 3'579'545u);  // one second of 3.579545 MHz
  EXPECT_EQ(rig.chipset->pm->foreign_bases(), 0u);
  // PM1a_CNT: SCI_EN reads 1; S5 powers off.
  EXPECT_EQ(rig.in(x86::kPiix4Pm1aCntPort, 2) & 1, 1u);
  rig.out(x86::kPiix4Pm1aCntPort, (5u << 10) | (1u << 13), 2);
  EXPECT_EQ(rig.poweroffs, 1);
  // PMEN is storage; offsets past PMTMR read 0; the AcpiPm reset register is not decoded here.
  rig.out(x86::kPiix4Pm1aEvtPort + 2, 0x0121, 2);
  EXPECT_EQ(rig.in(x86::kPiix4Pm1aEvtPort + 2, 2), 0x0121u);
  rig.out(x86::kPiix4PmBase + 6, 0x01, 1);
  EXPECT_EQ(rig.resets, 0);
  EXPECT_EQ(rig.in(x86::kPiix4PmBase + 0x28, 4), 0u);
  // PMTMR is read-only.
  rig.out(tmr, 0, 4);
  EXPECT_EQ(rig.in(tmr, 4), 3'579'545u);
}

TEST(PcChipsetTest, Piix4PmConfigRegisters) {
  PcChipsetRig rig;
  EXPECT_EQ(rig.cfg_read(1, 3, 0x40, 4), 1u);  // PMBA: I/O indicator only
  rig.cfg_write(1, 3, 0x40, 0xFFFFFFFE, 4);
  EXPECT_EQ(rig.cfg_read(1, 3, 0x40, 4), 0xFFC1u);  // bits 15:6 and the hardwired bit 0
  EXPECT_EQ(rig.chipset->pm->pm_base(), 0xFFC0u);
  // DEVACTB.APMC_EN reads set (SMM "already initialised") and cannot be cleared.
  EXPECT_EQ(rig.cfg_read(1, 3, 0x58, 4), 0x02000000u);
  rig.cfg_write(1, 3, 0x58, 0, 4);
  EXPECT_EQ(rig.cfg_read(1, 3, 0x58, 4), 0x02000000u);
  rig.cfg_write(1, 3, 0x80, 0xFF, 1);
  EXPECT_EQ(rig.cfg_read(1, 3, 0x80, 1), 1u);  // PMIOSE only
  EXPECT_TRUE(rig.chipset->pm->io_enabled());
  // SMBus base (90h) stays 0: Linux's i2c-piix4 then leaves the SMBus alone.
  rig.cfg_write(1, 3, 0x90, 0xB101, 4);
  EXPECT_EQ(rig.cfg_read(1, 3, 0x90, 4), 0u);
  // The command register's I/O bit (OVMF sets it) is writable.
  rig.cfg_write(1, 3, 0x04, 1, 2);
  EXPECT_EQ(rig.cfg_read(1, 3, 0x04, 2), 1u);
}

TEST(PcChipsetTest, PmbaElsewhereIsCountedAndNotDecoded) {
  PcChipsetRig rig;
  rig.cfg_write(1, 3, 0x40, 0x6001, 4);
  rig.cfg_write(1, 3, 0x80, 1, 1);
  EXPECT_EQ(rig.chipset->pm->foreign_bases(), 1u);
  EXPECT_EQ(rig.cfg_read(1, 3, 0x40, 4), 0x6001u);
  EXPECT_EQ(rig.in(x86::kPiix4PmTimerPort, 4), 0xFFFFFFFFu);
  EXPECT_EQ(rig.chipset->pm_io->misplaced_accesses(), 1u);
}

// SeaBIOS 1.16 moves PMBA to 0x600 once it loads tables from fw_cfg: a base firmware boots serve
// (a second view, vm_firmware.cc), so it is not counted or logged as foreign.
TEST(PcChipsetTest, SeaBiosPmBaseIsNotForeign) {
  PcChipsetRig rig;
  rig.cfg_write(1, 3, 0x40, x86::kSeaBiosPmBase | 1u, 4);
  rig.cfg_write(1, 3, 0x80, 1, 1);
  EXPECT_EQ(rig.chipset->pm->foreign_bases(), 0u);
}

TEST(PcChipsetTest, PmTimerIs24BitsAndMonotonic) {
  PcChipsetRig rig;
  rig.cfg_write(1, 3, 0x40, x86::kPiix4PmBase, 4);
  rig.cfg_write(1, 3, 0x80, 1, 1);
  uint32_t last = rig.in(x86::kPiix4PmTimerPort, 4);
  uint64_t wraps = 0;
  // 20 s in 100 ms steps: never above 24 bits, always forward modulo 2^24.
  for (int i = 0; i < 200; ++i) {
    rig.now_ns += 100'000'000;
    const uint32_t v = rig.in(x86::kPiix4PmTimerPort, 4);
    EXPECT_EQ(v & ~0xFFFFFFu, 0u);
    const uint32_t delta = (v - last) & 0xFFFFFF;
    EXPECT_NEAR(delta, 357'954, 1);
    if (v < last) ++wraps;
    last = v;
  }
  EXPECT_EQ(wraps, 4u);  // 2^24 ticks ≈ 4.69 s
  // The exact wrap point: tick 0xFFFFFF then 0.
  PmTimer t([&] { return rig.now_ns; });
  rig.now_ns = 4'686'968'600;  // 2^24 ticks are at 4686968874.5 ns
  EXPECT_EQ(t.read(), 0xFFFFFFu);
  rig.now_ns = 4'686'968'875;
  EXPECT_EQ(t.read(), 0u);
}

TEST(PcChipsetTest, PmTimerByteReadsSampleOnce) {
  PcChipsetRig rig;
  rig.cfg_write(1, 3, 0x40, x86::kPiix4PmBase, 4);
  rig.cfg_write(1, 3, 0x80, 1, 1);
  rig.now_ns = 2'000'000'000;  // 7159090 = 0x6D3D32
  EXPECT_EQ(rig.in(x86::kPiix4PmTimerPort, 1), 0x32u);
  EXPECT_EQ(rig.in(x86::kPiix4PmTimerPort + 1, 1), 0x3Du);
  EXPECT_EQ(rig.in(x86::kPiix4PmTimerPort + 2, 2), 0x006Du);
}

TEST(PcChipsetTest, SnapshotRoundTripsEveryRegister) {
  PcChipsetRig a;
  a.now_ns = 1'000'000'000;
  a.cfg_write(0, 0, 0x59, 0x30, 1);
  a.cfg_write(0, 0, 0x5C, 0x33331133, 4);
  a.cfg_write(0, 0, 0x72, 0x4A, 1);
  a.cfg_write(1, 0, 0x60, 0x0B0B0A0A, 4);
  a.cfg_write(1, 3, 0x40, x86::kPiix4PmBase | 1, 4);
  a.cfg_write(1, 3, 0x80, 1, 1);
  a.cfg_write(1, 3, 0x3C, 9, 1);
  a.out(x86::kElcrPort, 0x0C00, 2);
  a.out(0xCF9, 0x02, 1);
  a.out(x86::kPiix4Pm1aEvtPort + 2, 0x0100, 2);
  snap::ByteWriter w;
  a.chipset->save_state(w);

  PcChipsetRig b;
  b.now_ns = 77'000'000'000;  // a different host clock: the timer counts on from the saved value
  snap::ByteReader r(w.data(), "test");
  ASSERT_TRUE(b.chipset->restore_state(r)) << "restore";
  EXPECT_EQ(r.remaining(), 0u);
  for (uint8_t fn : {0, 3})
    for (uint8_t reg = 0; reg < 0xFC; reg += 4)
      EXPECT_EQ(b.cfg_read(fn == 0 ? 0 : 1, fn, reg, 4), a.cfg_read(fn == 0 ? 0 : 1, fn, reg, 4))
          << +fn << " " << +reg;
  for (uint8_t reg = 0; reg < 0xFC; reg += 4)
    EXPECT_EQ(b.cfg_read(1, 0, reg, 4), a.cfg_read(1, 0, reg, 4)) << +reg;
  EXPECT_EQ(b.in(x86::kElcrPort, 2), 0x0C00u);
  EXPECT_EQ(b.in(0xCF9, 1), 0x02u);
  EXPECT_EQ(b.in(x86::kPiix4Pm1aEvtPort + 2, 2), 0x0100u);
  EXPECT_EQ(b.in(x86::kPiix4PmTimerPort, 4), 3'579'545u);
  // Restore announces every PAM and PIRQ so the VMM can rebuild what hangs off them.
  EXPECT_EQ(b.pam_changes.size(), 7u);
  EXPECT_EQ(b.pam_changes[0], (PcChipsetRig::PamChange{0, 0x30}));
  EXPECT_EQ(b.pirq_routes.size(), 4u);
  EXPECT_EQ(b.pirq_routes[0], (PcChipsetRig::PirqRoute{0, 10}));
}

TEST(PcChipsetTest, RestoreRefusesBadStateNamingTheDevice) {
  PcChipsetRig a;
  snap::ByteWriter w;
  a.chipset->save_state(w);
  auto bytes = w.data();
  // Version.
  {
    auto bad = std::vector<uint8_t>(bytes.begin(), bytes.end());
    bad[0] = 9;
    PcChipsetRig b;
    snap::ByteReader r(bad, "test");
    auto res = b.chipset->restore_state(r);
    ASSERT_FALSE(res);
    EXPECT_NE(res.error().message().find("pc-chipset"), std::string::npos);
  }
  // The host bridge's device ID (offset 4 + 4 + 2 in the stream).
  {
    auto bad = std::vector<uint8_t>(bytes.begin(), bytes.end());
    bad[4 + 4 + 2] ^= 1;
    PcChipsetRig b;
    snap::ByteReader r(bad, "test");
    auto res = b.chipset->restore_state(r);
    ASSERT_FALSE(res);
    EXPECT_NE(res.error().message().find("i440fx"), std::string::npos);
  }
  // Truncated.
  {
    PcChipsetRig b;
    snap::ByteReader r(std::span<const uint8_t>(bytes.data(), bytes.size() - 1), "test");
    EXPECT_FALSE(b.chipset->restore_state(r));
  }
}

TEST(PcChipsetTest, ResetBringsPowerOnValues) {
  PcChipsetRig rig;
  rig.cfg_write(0, 0, 0x5C, 0x33333333, 4);
  rig.cfg_write(0, 0, 0x72, 0x1A, 1);
  rig.cfg_write(1, 0, 0x60, 0x0A0A0A0A, 4);
  rig.cfg_write(1, 3, 0x40, x86::kPiix4PmBase, 4);
  rig.cfg_write(1, 3, 0x80, 1, 1);
  rig.out(x86::kElcrPort, 0x0C00, 2);
  rig.out(0xCF9, 0x02, 1);
  rig.pam_changes.clear();
  rig.pirq_routes.clear();
  rig.chipset->reset();
  EXPECT_EQ(rig.cfg_read(0, 0, 0x5C, 4), 0u);
  EXPECT_EQ(rig.cfg_read(0, 0, 0x72, 1), 0x02u);
  EXPECT_EQ(rig.cfg_read(1, 0, 0x60, 4), 0x80808080u);
  EXPECT_EQ(rig.cfg_read(1, 3, 0x40, 4), 1u);
  EXPECT_EQ(rig.cfg_read(1, 3, 0x80, 1), 0u);
  EXPECT_FALSE(rig.chipset->pm->io_enabled());
  EXPECT_EQ(rig.in(x86::kElcrPort, 2), 0u);
  EXPECT_EQ(rig.in(0xCF9, 1), 0u);
  EXPECT_EQ(rig.pam_changes.size(), 4u);  // PAM3..PAM6 went back to 0
  EXPECT_EQ(rig.pirq_routes.size(), 4u);
}

TEST(PcChipsetTest, IntxIrqFollowsTheFirmwareSwizzle) {
  // SeaBIOS piix_pci_slot_get_irq / OVMF SetPciIntLine with {10, 10, 11, 11}.
  EXPECT_EQ(piix_intx_irq(1, 1), 10);
  EXPECT_EQ(piix_intx_irq(2, 1), 10);
  EXPECT_EQ(piix_intx_irq(3, 1), 11);
  EXPECT_EQ(piix_intx_irq(4, 1), 11);
  EXPECT_EQ(piix_intx_irq(5, 1), 10);
  EXPECT_EQ(piix_intx_irq(2, 2), 11);
  EXPECT_EQ(piix_intx_irq(2, 4), 10);
  EXPECT_EQ(piix_intx_irq(0, 1), 0xFF);
  EXPECT_EQ(piix_intx_irq(3, 0), 0xFF);
}

}  // namespace
}  // namespace tern
