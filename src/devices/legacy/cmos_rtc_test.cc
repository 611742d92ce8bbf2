#include "devices/legacy/cmos_rtc.h"

#include <gtest/gtest.h>

#include <atomic>
#include <ctime>

namespace tern {
namespace {

int64_t utc(int year, int mon, int day, int h, int m, int s) {
  std::tm t{};
  t.tm_year = year - 1900;
  t.tm_mon = mon - 1;
  t.tm_mday = day;
  t.tm_hour = h;
  t.tm_min = m;
  t.tm_sec = s;
  return ::timegm(&t);
}

class CmosRtcTest : public ::testing::Test {
 protected:
  uint8_t read(uint8_t index) {
    uint8_t v = index;
    rtc_.write(0, std::span<const uint8_t>(&v, 1));
    rtc_.read(1, std::span<uint8_t>(&v, 1));
    return v;
  }
  void write(uint8_t index, uint8_t value) {
    rtc_.write(0, std::span<const uint8_t>(&index, 1));
    rtc_.write(1, std::span<const uint8_t>(&value, 1));
  }

  std::atomic<int64_t> now_{utc(2024, 2, 29, 13, 45, 30)};  // a Thursday
  CmosRtc rtc_{[this] { return now_.load(); }};
};

TEST_F(CmosRtcTest, TimeIsBcd24hByDefault) {
  EXPECT_EQ(read(0x0B), 0x02);
  EXPECT_EQ(read(0x00), 0x30);
  EXPECT_EQ(read(0x02), 0x45);
  EXPECT_EQ(read(0x04), 0x13);
  EXPECT_EQ(read(0x06), 0x05);  // Sunday = 1
  EXPECT_EQ(read(0x07), 0x29);
  EXPECT_EQ(read(0x08), 0x02);
  EXPECT_EQ(read(0x09), 0x24);
  EXPECT_EQ(read(0x32), 0x20);
  EXPECT_EQ(read(0x0A), 0x26);  // UIP clear
  EXPECT_EQ(read(0x0C), 0x00);
  EXPECT_EQ(read(0x0D), 0x80);  // VRT
}

TEST_F(CmosRtcTest, BinaryAnd12HourModes) {
  write(0x0B, 0x06);  // binary, 24h
  EXPECT_EQ(read(0x00), 30);
  EXPECT_EQ(read(0x04), 13);
  EXPECT_EQ(read(0x09), 24);
  write(0x0B, 0x00);            // BCD, 12h
  EXPECT_EQ(read(0x04), 0x81);  // 1 PM
  now_ = utc(2024, 2, 29, 0, 5, 0);
  EXPECT_EQ(read(0x04), 0x12);  // 12 AM
}

TEST_F(CmosRtcTest, IndexKeepsTheNmiMaskBitAndIsWriteOnly) {
  uint8_t v = 0x80 | 0x0D;
  rtc_.write(0, std::span<const uint8_t>(&v, 1));
  EXPECT_TRUE(rtc_.nmi_masked());
  rtc_.read(1, std::span<uint8_t>(&v, 1));
  EXPECT_EQ(v, 0x80);  // register D: the index bits were 0x0D
  rtc_.read(0, std::span<uint8_t>(&v, 1));
  EXPECT_EQ(v, 0xFF);
  read(0x00);
  EXPECT_FALSE(rtc_.nmi_masked());
}

TEST_F(CmosRtcTest, GuestSetsTheClockUnderTheSetBit) {
  write(0x0B, 0x82);  // SET | 24h
  now_ += 100;        // frozen while SET
  EXPECT_EQ(read(0x00), 0x30);
  write(0x09, 0x25);
  write(0x08, 0x12);
  write(0x07, 0x31);
  write(0x04, 0x23);
  write(0x02, 0x59);
  write(0x00, 0x58);
  write(0x0B, 0x02);
  EXPECT_EQ(read(0x00), 0x58);
  now_ += 3;
  EXPECT_EQ(read(0x00), 0x01);
  EXPECT_EQ(read(0x02), 0x00);
  EXPECT_EQ(read(0x04), 0x00);
  EXPECT_EQ(read(0x07), 0x01);
  EXPECT_EQ(read(0x08), 0x01);
  EXPECT_EQ(read(0x09), 0x26);
  EXPECT_EQ(read(0x06), 0x05);  // 2026-01-01 is a Thursday
}

TEST_F(CmosRtcTest, NvramAndAlarmsArePlainStorage) {
  for (uint8_t i : {0x01, 0x03, 0x05, 0x0E, 0x10, 0x31, 0x33, 0x7F}) write(i, i ^ 0x5A);
  for (uint8_t i : {0x01, 0x03, 0x05, 0x0E, 0x10, 0x31, 0x33, 0x7F}) EXPECT_EQ(read(i), i ^ 0x5A);
  write(0x0C, 0xFF);
  write(0x0D, 0x00);
  EXPECT_EQ(read(0x0C), 0x00);
  EXPECT_EQ(read(0x0D), 0x80);
}

// Linux's mc146818_avoid_UIP() + mc146818_get_time() callback, with the host clock ticking
// from 12:59:59 to 13:00:00 in the middle of the reads: the result must be one consistent time.
TEST_F(CmosRtcTest, LinuxReadsAConsistentTimeAcrossASecondBoundary) {
  now_ = utc(2024, 12, 31, 23, 59, 59);
  int reads = 0;
  CmosRtc rtc([&] {
    if (++reads == 3) now_ += 1;  // tick after the first seconds read and its UIP check
    return now_.load();
  });
  auto cmos_read = [&](uint8_t index) {
    uint8_t v = index;
    rtc.write(0, std::span<const uint8_t>(&v, 1));
    rtc.read(1, std::span<uint8_t>(&v, 1));
    return v;
  };
  int sec = 0, min = 0, hour = 0, day = 0, mon = 0, year = 0, century = 0;
  bool ok = false;
  for (int attempt = 0; attempt < 10 && !ok; ++attempt) {
    uint8_t seconds = cmos_read(0x00);
    if (cmos_read(0x0A) & 0x80) continue;
    if (seconds != cmos_read(0x00)) continue;
    sec = seconds;
    min = cmos_read(0x02);
    hour = cmos_read(0x04);
    day = cmos_read(0x07);
    mon = cmos_read(0x08);
    year = cmos_read(0x09);
    century = cmos_read(0x32);
    if (cmos_read(0x0A) & 0x80) continue;
    if (seconds != cmos_read(0x00)) continue;
    ok = true;
  }
  ASSERT_TRUE(ok);
  EXPECT_EQ(sec, 0x00);
  EXPECT_EQ(min, 0x00);
  EXPECT_EQ(hour, 0x00);
  EXPECT_EQ(day, 0x01);
  EXPECT_EQ(mon, 0x01);
  EXPECT_EQ(year, 0x25);
  EXPECT_EQ(century, 0x20);
}

}  // namespace
}  // namespace tern
