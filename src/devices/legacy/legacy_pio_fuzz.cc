// libFuzzer target: the legacy PC devices on the PIO bus as tern wires them (8250 at 0x3F8,
// i8042 at 0x60/0x64, CMOS RTC at 0x70, ACPI PM at 0x600, POST code at 0x80), driven by a
// sequence of port reads and writes of 1, 2 or 4 bytes at and around their ports, plus the host
// side (console input into the UART, Ctrl+Alt+Del on the keyboard). Each input byte picks an
// operation; the following bytes are its operands.
//
// A small model follows what the guest wrote (UART LCR/MCR, the CMOS index, the i8042 command
// waiting for a parameter) and checks, byte by byte, what must read back: all-ones from
// unclaimed ports and from bytes past a device's registers, write-only ports (0x70, 0x80,
// RESET_REG), LSR's THRE/TEMT, reserved bits as 0, CMOS registers C/D, the i8042 status bits
// that never change, the UART IIR against its IRQ line. The reset and power-off callbacks fire
// exactly when the guest asked for them; transmitted bytes reach the console; the keyboard IRQ
// is high only with a byte in the output buffer.
#include <cstdint>
#include <memory>
#include <vector>

#include "arch/x86/layout.h"
#include "base/testing/fuzz_input.h"
#include "bus/bus.h"
#include "devices/legacy/acpi_pm.h"
#include "devices/legacy/cmos_rtc.h"
#include "devices/legacy/i8042.h"
#include "devices/legacy/i8042_port.h"
#include "devices/legacy/i8042_registers.h"
#include "devices/legacy/post_code_sink.h"
#include "devices/legacy/serial8250.h"
#include "devices/testing/fake_irq_line.h"

namespace {

using namespace tern;
using tern::testing::FuzzInput;

constexpr uint16_t kCom1 = x86::kSerialPort;
constexpr uint16_t kAcpi = x86::kAcpiPm1aEvtPort;

struct Range {
  uint16_t base, len;
};
constexpr Range kRanges[] = {
    {kCom1, 8},          {x86::kI8042DataPort, 1},       {x86::kI8042CommandPort, 1},
    {x86::kCmosPort, 2}, {kAcpi, x86::kAcpiPmPortCount}, {x86::kPostCodePort, 1}};
constexpr uint16_t kBases[] = {kCom1, x86::kI8042DataPort, x86::kI8042CommandPort, x86::kCmosPort,
                               kAcpi, x86::kPostCodePort};

/// The range an access starting at `port` goes to (nullptr: unclaimed).
const Range* owner(uint32_t port) {
  for (const Range& r : kRanges)
    if (port >= r.base && port < uint32_t{r.base} + r.len) return &r;
  return nullptr;
}

struct Fuzz {
  testing::FakeIrqLine serial_irq, kbd_irq;
  uint64_t console_bytes = 0;
  uint64_t kbd_resets = 0, acpi_resets = 0, poweroffs = 0;
  std::shared_ptr<Serial8250> uart = std::make_shared<Serial8250>(
      serial_irq.line(), [this](std::span<const uint8_t> b) { console_bytes += b.size(); }, 64);
  std::shared_ptr<I8042> kbc = std::make_shared<I8042>(kbd_irq.line(), [this] { ++kbd_resets; });
  std::shared_ptr<AcpiPm> acpi =
      std::make_shared<AcpiPm>([this] { ++poweroffs; }, [this] { ++acpi_resets; });
  std::shared_ptr<CmosRtc> rtc = std::make_shared<CmosRtc>([] { return int64_t{1'700'000'000}; });
  Bus pio{"pio"};

  // The model.
  uint8_t lcr = 0x03, mcr = 0, cmos_index = 0;
  std::optional<uint8_t> kbc_pending;
  uint64_t want_console = 0, want_kbd_resets = 0, want_acpi_resets = 0, want_poweroffs = 0;

  Fuzz() {
    (void)pio.insert(uart, kCom1, Serial8250::kRegisterCount);
    (void)insert_i8042(pio, kbc);
    (void)pio.insert(acpi, kAcpi, AcpiPm::kRegisterCount);
    (void)pio.insert(rtc, x86::kCmosPort, CmosRtc::kPortCount);
    (void)pio.insert(std::make_shared<PostCodeSink>(), x86::kPostCodePort, 1);
  }

  /// The model's view of one byte written at `port` (a byte the device receives).
  void wrote(uint16_t port, uint8_t v) {
    using namespace tern::i8042;
    const bool dlab = lcr & uart::kLcrDlab;
    if (port == kCom1 + uart::kRbrThr && !dlab && !(mcr & uart::kMcrLoop)) ++want_console;
    if (port == kCom1 + uart::kLcr) lcr = v;
    if (port == kCom1 + uart::kMcr) mcr = v & uart::kMcrMask;
    if (port == x86::kCmosPort) cmos_index = v & 0x7F;
    if (port == x86::kI8042CommandPort) {
      kbc_pending.reset();
      bool ram_write = v >= kCmdWriteRam && v < kCmdWriteRam + 32;
      if (ram_write || (v >= kCmdWriteOutputPort && v <= kCmdWriteAux)) kbc_pending = v;
      if (v >= kCmdPulseOutput && !(v & kOutputPortReset)) ++want_kbd_resets;
    }
    if (port == x86::kI8042DataPort && kbc_pending) {
      if (*kbc_pending == kCmdWriteOutputPort && !(v & kOutputPortReset)) ++want_kbd_resets;
      kbc_pending.reset();
    }
    if (port == kAcpi + 5 && (v & 0x20) && ((v >> 2) & 7) == x86::kAcpiS5SleepType)
      ++want_poweroffs;
    if (port == kAcpi + 6 && v == x86::kAcpiResetValue) ++want_acpi_resets;
  }

  /// Checks one byte read at `port` (a byte the device answered).
  void read_back(uint16_t port, uint8_t v) {
    using namespace tern::i8042;
    const bool dlab = lcr & uart::kLcrDlab;
    switch (port) {
      case x86::kCmosPort:
      case x86::kPostCodePort:
        FUZZ_CHECK(v == 0xFF);
        break;  // write-only
      case kAcpi + 4:
        FUZZ_CHECK(v & 1);
        break;  // SCI_EN
      case kAcpi + 5:
        FUZZ_CHECK(!(v & 0x20));
        break;  // SLP_EN is write-only
      case kAcpi + 6:
        FUZZ_CHECK(v == 0);
        break;  // RESET_REG
      case kCom1 + uart::kIer:
        if (!dlab) FUZZ_CHECK((v & ~uart::kIerMask) == 0);
        break;
      case kCom1 + uart::kIirFcr:
        FUZZ_CHECK((v & 0x30) == 0);
        break;
      case kCom1 + uart::kLcr:
        FUZZ_CHECK(v == lcr);
        break;
      case kCom1 + uart::kMcr:
        FUZZ_CHECK(v == mcr);
        break;
      case kCom1 + uart::kLsr:
        FUZZ_CHECK((v & (uart::kLsrThre | uart::kLsrTemt)) == (uart::kLsrThre | uart::kLsrTemt));
        break;
      case kCom1 + uart::kMsr:
        if (!(mcr & uart::kMcrLoop))
          FUZZ_CHECK((v & 0xF0) == (uart::kMsrDcd | uart::kMsrDsr | uart::kMsrCts));
        break;
      case x86::kI8042CommandPort:
        FUZZ_CHECK((v & kStatusKeylock) && !(v & (kStatusIbf | kStatusAuxData)));
        break;
      case x86::kCmosPort + 1:
        if (cmos_index == 0x0C) FUZZ_CHECK(v == 0);
        if (cmos_index == 0x0D) FUZZ_CHECK(v == 0x80);
        if (cmos_index == 0x0A) FUZZ_CHECK(!(v & 0x80));  // never mid-update
        break;
    }
  }

  void access(uint16_t port, size_t w, bool write, uint32_t value) {
    auto* v = reinterpret_cast<uint8_t*>(&value);
    const Range* r = owner(port);
    auto delivered = [&](size_t i) { return r && port + i < uint32_t{r->base} + r->len; };
    if (write) {
      pio.write(port, std::span<const uint8_t>(v, w));
      for (size_t i = 0; i < w; ++i)
        if (delivered(i)) wrote(static_cast<uint16_t>(port + i), v[i]);
      return;
    }
    const bool irq_before = serial_irq.level();
    pio.read(port, std::span<uint8_t>(v, w));
    for (size_t i = 0; i < w; ++i) {
      if (!delivered(i)) {
        FUZZ_CHECK(v[i] == 0xFF);
        continue;
      }
      read_back(static_cast<uint16_t>(port + i), v[i]);
    }
    // A lone IIR read reports exactly what the line showed before it.
    if (port == kCom1 + uart::kIirFcr && w == 1)
      FUZZ_CHECK(irq_before == ((v[0] & uart::kIirNoInt) == 0));
  }

  void check() {
    FUZZ_CHECK(console_bytes == want_console);
    FUZZ_CHECK(kbd_resets == want_kbd_resets);
    FUZZ_CHECK(acpi_resets == want_acpi_resets);
    FUZZ_CHECK(poweroffs == want_poweroffs);
    if (kbd_irq.level()) FUZZ_CHECK(kbc->read_status() & i8042::kStatusObf);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tern::testing::quiet_logs();
  FuzzInput in(data, size);
  Fuzz f;
  for (int n = 0; n < 1024 && !in.empty(); ++n) {
    const uint8_t op = in.u8();
    switch (op % 6) {
      case 0:
      case 1:
      case 2:
      case 3: {
        size_t w = in.width(4);
        // Usually a device's own registers, sometimes just before or past them, rarely anywhere.
        uint16_t port = kBases[in.u8() % std::size(kBases)];
        uint8_t d = in.u8();
        port = static_cast<uint16_t>(d < 0xF0 ? port + d % 10 - 1 : in.u16());
        uint32_t v = in.u8() % 4 ? in.u8() : in.u32();
        f.access(port, w, op % 2 == 0, v);
        break;
      }
      case 4: {  // console input
        uint8_t b[16];
        size_t len = in.u8() % sizeof b;
        for (size_t i = 0; i < len; ++i) b[i] = in.u8();
        FUZZ_CHECK(f.uart->enqueue_input(std::span<const uint8_t>(b, len)) <= len);
        break;
      }
      default:
        (void)f.kbc->trigger_ctrl_alt_del();
        break;
    }
    f.check();
  }
  return 0;
}
