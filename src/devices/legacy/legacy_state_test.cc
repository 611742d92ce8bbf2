// Snapshot round trips of the legacy devices: save -> fresh device -> restore -> save gives the
// same bytes and the same guest-visible reads; truncated or corrupted input fails cleanly.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <vector>

#include "devices/legacy/acpi_pm.h"
#include "devices/legacy/cmos_rtc.h"
#include "devices/legacy/i8042.h"
#include "devices/legacy/serial8250.h"
#include "devices/legacy/serial_registers.h"

namespace tern {
namespace {

template <class D>
std::vector<uint8_t> save(const D& d) {
  snap::ByteWriter w;
  d.save_state(w);
  return w.take();
}

template <class D>
Result<void> restore(D& d, const std::vector<uint8_t>& bytes) {
  snap::ByteReader r(bytes, "test section");
  TRY(d.restore_state(r));
  return r.expect_end();
}

/// Every strict prefix of `bytes` must fail to restore into a fresh device, with an error.
template <class D>
void expect_prefixes_fail(const std::vector<uint8_t>& bytes,
                          const std::function<std::unique_ptr<D>()>& make) {
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto d = make();
    std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + static_cast<long>(n));
    auto r = restore(*d, prefix);
    EXPECT_FALSE(r) << "prefix of " << n << " bytes restored";
  }
}

uint8_t rd(BusDevice& d, uint64_t off) {
  uint8_t v = 0;
  d.read(off, std::span<uint8_t>(&v, 1));
  return v;
}
void wr(BusDevice& d, uint64_t off, uint8_t v) { d.write(off, std::span<const uint8_t>(&v, 1)); }

// ---- Serial8250 ----

std::unique_ptr<Serial8250> make_uart() {
  return std::make_unique<Serial8250>(IrqLine{}, ByteSink{}, 64);
}

TEST(LegacyState, SerialRoundTripKeepsRegistersFifoAndInterrupts) {
  using namespace uart;
  auto a = make_uart();
  wr(*a, kLcr, kLcrDlab);
  wr(*a, kRbrThr, 0x01);  // DLL: 115200 baud
  wr(*a, kIer, 0x00);     // DLM
  wr(*a, kLcr, 0x1B);     // 8E1
  wr(*a, kIirFcr, kFcrEnableFifo | 0xC0);
  wr(*a, kMcr, kMcrDtr | kMcrRts | kMcrOut2);
  wr(*a, kScr, 0xA5);
  wr(*a, kIer, kIerRdi | kIerThri | kIerRlsi);
  const uint8_t input[] = {'h', 'e', 'l', 'l', 'o'};
  ASSERT_EQ(a->enqueue_input(input), 5u);
  EXPECT_EQ(rd(*a, kRbrThr), 'h');
  auto bytes = save(*a);

  auto b = make_uart();
  ASSERT_TRUE(restore(*b, bytes));
  EXPECT_EQ(save(*b), bytes);
  // Guest-visible reads match, register by register, including the destructive ones.
  for (uint64_t reg : {kLcr, kMcr, kScr, kIer, kIirFcr, kLsr, kMsr, kRbrThr, kRbrThr, kIirFcr,
                       kRbrThr, kRbrThr, kLsr, kIirFcr, kIirFcr, kRbrThr})
    EXPECT_EQ(rd(*a, reg), rd(*b, reg)) << "register " << reg;
  wr(*a, kLcr, kLcrDlab);
  wr(*b, kLcr, kLcrDlab);
  EXPECT_EQ(rd(*b, kRbrThr), 0x01);
  EXPECT_EQ(rd(*a, kIer), rd(*b, kIer));
}

TEST(LegacyState, SerialRejectsTruncatedAndInvalidState) {
  auto a = make_uart();
  const uint8_t input[] = {1, 2, 3};
  wr(*a, uart::kIer, uart::kIerRdi);
  ASSERT_EQ(a->enqueue_input(input), 3u);
  auto bytes = save(*a);
  expect_prefixes_fail<Serial8250>(bytes, make_uart);

  auto bad = bytes;
  bad[0] = 2;  // version
  auto r = restore(*make_uart(), bad);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("serial0"), std::string::npos) << r.error().message();
  EXPECT_NE(r.error().message().find("version"), std::string::npos);

  bad = bytes;
  bad[4 + 1] = 0xF0;  // IER with reserved bits
  r = restore(*make_uart(), bad);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("ier"), std::string::npos) << r.error().message();

  // A receive FIFO longer than the device's.
  auto big = make_uart();
  snap::ByteWriter w;
  w.u32(1);
  for (int i = 0; i < 10; ++i) w.u8(0);
  w.boolean(false);
  w.blob(std::vector<uint8_t>(65, 'x'));
  r = restore(*big, w.data());
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("receive fifo"), std::string::npos) << r.error().message();
}

// ---- I8042 ----

std::unique_ptr<I8042> make_kbc() { return std::make_unique<I8042>(IrqLine{}, nullptr); }

TEST(LegacyState, I8042RoundTripKeepsOutputQueueAndCommandByte) {
  auto a = make_kbc();
  a->write_command(0x60);  // write CTR
  a->write_data(0x47);     // KBDINT | SYS | XLATE
  a->write_data(0xF2);     // keyboard: identify -> FA AB 83 queued
  a->write_command(0x20);  // read CTR: queued behind the keyboard bytes? (controller first)
  a->write_command(0xD1);  // write output port: parameter pending
  auto bytes = save(*a);

  auto b = make_kbc();
  ASSERT_TRUE(restore(*b, bytes));
  EXPECT_EQ(save(*b), bytes);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(a->read_status(), b->read_status()) << i;
    EXPECT_EQ(a->read_data(), b->read_data()) << i;
  }
  a->write_data(0x03);  // the pending output-port write completes on both
  b->write_data(0x03);
  a->write_command(0xD0);
  b->write_command(0xD0);
  EXPECT_EQ(b->read_data(), 0x03);
  EXPECT_EQ(a->read_data(), 0x03);
  expect_prefixes_fail<I8042>(bytes, make_kbc);

  auto bad = bytes;
  bad.back() = 0;  // keyboard typematic is free-form; the scan code set is not
  bad[bad.size() - 4] = 9;
  auto r = restore(*make_kbc(), bad);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("scan code set"), std::string::npos) << r.error().message();
}

// ---- CmosRtc ----

std::unique_ptr<CmosRtc> make_rtc() {
  return std::make_unique<CmosRtc>([] { return int64_t{1'700'000'000}; });
}

TEST(LegacyState, CmosRoundTripKeepsRamIndexOffsetAndFrozenTime) {
  auto a = make_rtc();
  wr(*a, 0, 0x40);
  wr(*a, 1, 0x99);  // RAM byte 0x40
  wr(*a, 0, 0x09);
  wr(*a, 1, 0x30);  // year 2030: an offset from the host clock
  wr(*a, 0, 0x0B);
  wr(*a, 1, 0x82);  // SET: time frozen
  wr(*a, 0, 0x00);
  wr(*a, 1, 0x45);  // seconds written while frozen
  wr(*a, 0, 0x80 | 0x40);  // NMI masked, index 0x40
  auto bytes = save(*a);

  auto b = make_rtc();
  ASSERT_TRUE(restore(*b, bytes));
  EXPECT_EQ(save(*b), bytes);
  EXPECT_TRUE(b->nmi_masked());
  EXPECT_EQ(rd(*b, 1), 0x99);
  for (uint8_t reg : {0x00, 0x02, 0x04, 0x07, 0x08, 0x09, 0x32, 0x0A, 0x0B, 0x0D}) {
    wr(*a, 0, reg);
    wr(*b, 0, reg);
    EXPECT_EQ(rd(*a, 1), rd(*b, 1)) << "register " << int(reg);
  }
  expect_prefixes_fail<CmosRtc>(bytes, make_rtc);

  auto bad = bytes;
  bad[4] = 0x80;  // index out of range
  auto r = restore(*make_rtc(), bad);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("cmos-rtc: index"), std::string::npos)
      << r.error().message();
}

// ---- AcpiPm ----

std::unique_ptr<AcpiPm> make_pm() { return std::make_unique<AcpiPm>(nullptr, nullptr); }

TEST(LegacyState, AcpiPmRoundTrip) {
  auto a = make_pm();
  wr(*a, 2, 0x21);
  wr(*a, 3, 0x01);  // PM1_EN
  wr(*a, 4, 0x01);
  wr(*a, 5, (1 << 2) | (1 << 5));  // SLP_TYP 1 + SLP_EN: unsupported sleep -> WAK_STS
  auto bytes = save(*a);
  auto b = make_pm();
  ASSERT_TRUE(restore(*b, bytes));
  EXPECT_EQ(save(*b), bytes);
  for (uint64_t off = 0; off < AcpiPm::kRegisterCount; ++off)
    EXPECT_EQ(rd(*a, off), rd(*b, off)) << off;
  EXPECT_EQ(rd(*b, 1), 0x80);  // WAK_STS
  expect_prefixes_fail<AcpiPm>(bytes, make_pm);
  auto bad = bytes;
  bad[bad.size() - 1] |= 0x20;  // SLP_EN stored
  EXPECT_FALSE(restore(*make_pm(), bad));
}

}  // namespace
}  // namespace tern
