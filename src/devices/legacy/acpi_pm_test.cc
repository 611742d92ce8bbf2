#include "devices/legacy/acpi_pm.h"

#include <gtest/gtest.h>

#include <memory>

#include "arch/x86/layout.h"
#include "bus/bus.h"

namespace tern {
namespace {

class AcpiPmTest : public ::testing::Test {
 protected:
  AcpiPmTest() : pm_(std::make_shared<AcpiPm>([this] { ++poweroffs_; }, [this] { ++resets_; })) {
    TERN_CHECK(pio_.insert(pm_, x86::kAcpiPm1aEvtPort, AcpiPm::kRegisterCount).has_value());
  }
  void out8(uint16_t port, uint8_t v) { pio_.write(port, std::span<const uint8_t>(&v, 1)); }
  void out16(uint16_t port, uint16_t v) {
    pio_.write(port, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&v), 2));
  }
  uint16_t in16(uint16_t port) {
    uint16_t v = 0;
    pio_.read(port, std::span<uint8_t>(reinterpret_cast<uint8_t*>(&v), 2));
    return v;
  }
  static uint16_t pm1_cnt(unsigned typ, bool enable) {
    return static_cast<uint16_t>(typ << 10 | (enable ? 1u << 13 : 0) | 1u);
  }
  static constexpr uint16_t kSts = x86::kAcpiPm1aEvtPort;
  static constexpr uint16_t kEn = x86::kAcpiPm1aEvtPort + 2;
  static constexpr uint16_t kCnt = x86::kAcpiPm1aCntPort;

  Bus pio_{"pio"};
  int poweroffs_ = 0;
  int resets_ = 0;
  std::shared_ptr<AcpiPm> pm_;
};

TEST_F(AcpiPmTest, AlwaysInAcpiMode) { EXPECT_EQ(in16(kCnt) & 1, 1); }

TEST_F(AcpiPmTest, S5WithSlpEnPowersOff) {
  // acpi_hw_legacy_sleep(): clear WAK_STS, write SLP_TYP, then SLP_TYP | SLP_EN (16-bit).
  out16(kSts, 0x8000);
  out16(kCnt, pm1_cnt(x86::kAcpiS5SleepType, false));
  EXPECT_EQ(poweroffs_, 0);
  out16(kCnt, pm1_cnt(x86::kAcpiS5SleepType, true));
  EXPECT_EQ(poweroffs_, 1);
  EXPECT_EQ(resets_, 0);
  EXPECT_EQ(in16(kSts), 0);  // the guest keeps waiting; the VMM stops it
  EXPECT_EQ(in16(kCnt) & (1u << 13), 0u);  // SLP_EN is write-only
  EXPECT_EQ(pm_->stats().poweroff_requests, 1u);
}

TEST_F(AcpiPmTest, OtherSleepTypesWakeAtOnce) {
  for (unsigned typ = 0; typ < 8; ++typ) {
    if (typ != x86::kAcpiS5SleepType) out16(kCnt, pm1_cnt(typ, true));
  }
  EXPECT_EQ(poweroffs_, 0);
  EXPECT_EQ(in16(kSts), 0x8000);
  out16(kSts, 0x7FFF);  // writing 0 to WAK_STS keeps it
  EXPECT_EQ(in16(kSts), 0x8000);
  out16(kSts, 0x8000);  // write 1 to clear
  EXPECT_EQ(in16(kSts), 0);
  EXPECT_EQ(pm_->stats().unsupported_sleeps, 7u);
}

TEST_F(AcpiPmTest, EnableRegisterIsStorage) {
  out16(kEn, 0x0121);
  EXPECT_EQ(in16(kEn), 0x0121);
}

TEST_F(AcpiPmTest, ResetValueResetsAndNothingElseDoes) {
  for (int v = 0; v < 256; ++v) {
    if (v != x86::kAcpiResetValue) out8(x86::kAcpiResetPort, static_cast<uint8_t>(v));
  }
  EXPECT_EQ(resets_, 0);
  out8(x86::kAcpiResetPort, x86::kAcpiResetValue);
  EXPECT_EQ(resets_, 1);
  EXPECT_EQ(poweroffs_, 0);
}

TEST_F(AcpiPmTest, SweepOfAllOffsetsAndWidthsOnlyActsWhenMeant) {
  for (uint64_t off = 0; off < AcpiPm::kRegisterCount + 2; ++off) {
    for (size_t width : {1u, 2u, 4u}) {
      for (uint32_t v : {0x00u, 0xFFu, 0x5Au}) {
        uint8_t buf[4] = {static_cast<uint8_t>(v), static_cast<uint8_t>(v), static_cast<uint8_t>(v),
                          static_cast<uint8_t>(v)};
        pm_->read(off, std::span<uint8_t>(buf, width));
        // Avoid the two "meant" writes: SLP_EN with S5, and the reset value.
        if (v != 0x00) continue;
        pm_->write(off, std::span<const uint8_t>(buf, width));
      }
    }
  }
  EXPECT_EQ(poweroffs_, 0);
  EXPECT_EQ(resets_, 0);
}

}  // namespace
}  // namespace tern
