// Every legacy device against every offset x width x value, then long random sequences: no
// crash, no hang, and no reset/power-off callback unless the guest asked for one.
#include <gtest/gtest.h>

#include <array>
#include <memory>
#include <random>
#include <vector>

#include "arch/x86/layout.h"
#include "devices/legacy/acpi_pm.h"
#include "devices/legacy/cmos_rtc.h"
#include "devices/legacy/i8042.h"
#include "devices/legacy/i8042_port.h"
#include "devices/legacy/i8042_registers.h"
#include "devices/legacy/post_code_sink.h"
#include "devices/legacy/serial8250.h"
#include "devices/testing/fake_irq_line.h"

namespace tern {
namespace {

constexpr std::array<size_t, 4> kWidths = {1, 2, 4, 8};
constexpr std::array<uint8_t, 12> kValues = {0x00, 0x01, 0x02, 0x0F, 0x10, 0x20,
                                             0x34, 0x55, 0x7F, 0x80, 0xFE, 0xFF};

// Calls `on_byte(offset, value)` for each byte a write of `width` bytes of `value` delivers to
// a device of `size` registers at `offset` (ByteIoDevice splits accesses into bytes).
template <class F>
void for_each_delivered_byte(uint64_t size, uint64_t offset, size_t width, uint8_t value,
                             F on_byte) {
  for (size_t i = 0; i < width; ++i)
    if (offset + i < size) on_byte(offset + i, value);
}

// Drives `dev` through all offsets [0, size + 4) x widths x values, reads after each write.
template <class OnWrite>
void sweep(BusDevice& dev, uint64_t size, OnWrite on_write) {
  for (uint64_t off = 0; off < size + 4; ++off) {
    for (size_t w : kWidths) {
      for (uint8_t v : kValues) {
        std::vector<uint8_t> data(w, v);
        on_write(off, w, v);
        dev.write(off, data);
        std::vector<uint8_t> r(w, 0);
        dev.read(off, r);
        for (size_t i = 0; i < w; ++i) {
          if (off + i >= size) {
            EXPECT_EQ(r[i], 0xFF) << "past the end at " << off + i;
          }
        }
      }
    }
  }
}

// Random accesses, biased to the device's own offsets.
template <class OnWrite>
void random_walk(BusDevice& dev, uint64_t size, uint32_t seed, OnWrite on_write) {
  std::mt19937 rng(seed);
  for (int i = 0; i < 20000; ++i) {
    uint64_t off = rng() % (size + 2);
    size_t w = kWidths[rng() % kWidths.size()];
    auto v = static_cast<uint8_t>(rng());
    std::vector<uint8_t> data(w, v);
    if (rng() % 2) {
      on_write(off, w, v);
      dev.write(off, data);
    } else {
      dev.read(off, data);
    }
  }
}

TEST(LegacySweep, Serial8250) {
  testing::FakeIrqLine irq;
  size_t out_bytes = 0;
  Serial8250 uart(
      irq.line(), [&](std::span<const uint8_t> b) { out_bytes += b.size(); }, 64);
  auto nothing = [](uint64_t, size_t, uint8_t) {};
  sweep(uart, Serial8250::kRegisterCount, nothing);
  std::array<uint8_t, 100> junk{};
  uart.enqueue_input(junk);
  random_walk(uart, Serial8250::kRegisterCount, 1, nothing);
  EXPECT_FALSE(irq.has_repeats());
  EXPECT_LE(out_bytes, uart.stats().tx_bytes);
}

TEST(LegacySweep, I8042ResetsOnlyWhenAsked) {
  using namespace i8042;
  testing::FakeIrqLine irq;
  int resets = 0;
  auto ctl = std::make_shared<I8042>(irq.line(), [&] { ++resets; });
  I8042Port data(ctl, I8042Port::Kind::kData);
  I8042Port cmd(ctl, I8042Port::Kind::kCommand);
  // The expected resets follow the datasheet: a pulse command with bit 0 clear, or an
  // output-port write (after 0xD1) with bit 0 clear.
  int expected = 0;
  bool d1_pending = false;
  auto on_cmd = [&](uint64_t off, size_t w, uint8_t v) {
    for_each_delivered_byte(1, off, w, v, [&](uint64_t, uint8_t b) {
      if (b >= kCmdPulseOutput && !(b & 1)) ++expected;
      d1_pending = b == kCmdWriteOutputPort;
    });
  };
  auto on_data = [&](uint64_t off, size_t w, uint8_t v) {
    for_each_delivered_byte(1, off, w, v, [&](uint64_t, uint8_t b) {
      if (d1_pending && !(b & 1)) ++expected;
      d1_pending = false;
    });
  };
  sweep(cmd, 1, on_cmd);
  sweep(data, 1, on_data);
  EXPECT_EQ(resets, expected);
  std::mt19937 rng(2);
  for (int i = 0; i < 20000; ++i) {
    bool is_cmd = rng() % 2;
    uint64_t off = rng() % 3;
    size_t w = kWidths[rng() % kWidths.size()];
    auto v = static_cast<uint8_t>(rng());
    if (rng() % 8 == 0) v = static_cast<uint8_t>(0xD0 + rng() % 5);  // commands with a parameter
    std::vector<uint8_t> bytes(w, v);
    if (rng() % 2) {
      if (is_cmd) {
        on_cmd(off, w, v);
      } else {
        on_data(off, w, v);
      }
      (is_cmd ? static_cast<BusDevice&>(cmd) : data).write(off, bytes);
    } else {
      (is_cmd ? static_cast<BusDevice&>(cmd) : data).read(off, bytes);
    }
    if (i % 1000 == 0) ctl->trigger_ctrl_alt_del();
  }
  EXPECT_EQ(resets, expected);
  EXPECT_FALSE(irq.has_repeats());
}

TEST(LegacySweep, AcpiPmCallsBackOnlyWhenAsked) {
  int poweroffs = 0, resets = 0;
  AcpiPm pm([&] { ++poweroffs; }, [&] { ++resets; });
  int want_poweroffs = 0, want_resets = 0;
  auto on_write = [&](uint64_t off, size_t w, uint8_t v) {
    for_each_delivered_byte(AcpiPm::kRegisterCount, off, w, v, [&](uint64_t reg, uint8_t b) {
      // PM1_CNT's high byte (offset 5) holds SLP_EN (bit 13 -> 5) and SLP_TYP (12:10 -> 4:2).
      if (reg == 5 && (b & 0x20) && ((b >> 2) & 7) == x86::kAcpiS5SleepType) ++want_poweroffs;
      if (reg == 6 && b == x86::kAcpiResetValue) ++want_resets;
    });
  };
  sweep(pm, AcpiPm::kRegisterCount, on_write);
  random_walk(pm, AcpiPm::kRegisterCount, 3, on_write);
  EXPECT_EQ(poweroffs, want_poweroffs);
  EXPECT_EQ(resets, want_resets);
  EXPECT_GT(want_poweroffs, 0);
  EXPECT_GT(want_resets, 0);
}

TEST(LegacySweep, CmosRtc) {
  CmosRtc rtc([] { return int64_t{1700000000}; });
  auto nothing = [](uint64_t, size_t, uint8_t) {};
  sweep(rtc, CmosRtc::kPortCount, nothing);
  random_walk(rtc, CmosRtc::kPortCount, 4, nothing);
  // Every index, every value, including garbage times while SET is on and off.
  for (int index = 0; index < 256; ++index) {
    for (int v : {0x00, 0x59, 0x99, 0xFF}) {
      std::array<uint8_t, 2> iv{static_cast<uint8_t>(index), static_cast<uint8_t>(v)};
      rtc.write(0, iv);  // index, then data through the 2-byte split
      uint8_t r = 0;
      rtc.read(1, std::span<uint8_t>(&r, 1));
    }
  }
  uint8_t d = 0x0D;
  rtc.write(0, std::span<const uint8_t>(&d, 1));
  rtc.read(1, std::span<uint8_t>(&d, 1));
  EXPECT_EQ(d, 0x80);
}

TEST(LegacySweep, PostCodeSink) {
  PostCodeSink post;
  uint64_t writes = 0;
  auto count = [&](uint64_t off, size_t w, uint8_t v) {
    for_each_delivered_byte(1, off, w, v, [&](uint64_t, uint8_t) { ++writes; });
  };
  sweep(post, 1, count);
  EXPECT_EQ(post.writes(), writes);
  uint8_t r = 0;
  post.read(0, std::span<uint8_t>(&r, 1));
  EXPECT_EQ(r, 0xFF);
  uint8_t code = 0x42;
  post.write(0, std::span<const uint8_t>(&code, 1));
  EXPECT_EQ(post.last_code(), 0x42);
}

}  // namespace
}  // namespace tern
