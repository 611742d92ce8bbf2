#include "devices/legacy/i8042.h"

#include <gtest/gtest.h>

#include <vector>

#include "arch/x86/layout.h"
#include "bus/bus.h"
#include "devices/legacy/i8042_port.h"
#include "devices/legacy/i8042_registers.h"
#include "devices/testing/fake_irq_line.h"

namespace tern {
namespace {

using namespace i8042;
using Bytes = std::vector<uint8_t>;

class I8042Test : public ::testing::Test {
 protected:
  I8042Test() : ctl_(irq_.line(), [this] { ++resets_; }) {}

  // Linux's __i8042_command(): the command byte, parameters, then replies. i8042_wait_read()
  // would spin for 500 ms on a silent controller; here a missing reply counts as a timeout.
  int command(uint8_t* param, int cmd) {
    ctl_.write_command(cmd & 0xFF);
    for (int i = 0; i < ((cmd >> 12) & 0xF); ++i) ctl_.write_data(param[i]);
    for (int i = 0; i < ((cmd >> 8) & 0xF); ++i) {
      if (!(ctl_.read_status() & kStatusObf)) {
        ++timeouts_;
        return -1;
      }
      if (cmd == 0x11D3 && !(ctl_.read_status() & kStatusAuxData)) return -1;  // "auxerr"
      param[i] = ctl_.read_data();
    }
    return 0;
  }
  // i8042_flush()
  int flush() {
    for (int n = 0; ctl_.read_status() & kStatusObf; ++n) {
      if (n >= 16) return -1;
      ctl_.read_data();
    }
    return 0;
  }
  // The keyboard side (atkbd via i8042_kbd_write + i8042_interrupt): send a byte, then collect
  // every reply the way the interrupt handler does, checking each came with its own IRQ edge.
  Bytes kbd(uint8_t byte) {
    size_t edges = irq_.rising_edges();
    ctl_.write_data(byte);
    Bytes got;
    while (ctl_.read_status() & kStatusObf) {
      EXPECT_TRUE(irq_.level());
      got.push_back(ctl_.read_data());
    }
    EXPECT_EQ(irq_.rising_edges() - edges, got.size());
    EXPECT_FALSE(irq_.level());
    return got;
  }
  Bytes drain() {
    Bytes got;
    while (ctl_.read_status() & kStatusObf) got.push_back(ctl_.read_data());
    return got;
  }

  testing::FakeIrqLine irq_;
  int resets_ = 0;
  int timeouts_ = 0;
  I8042 ctl_;
};

TEST_F(I8042Test, LinuxProbesAKeyboardAndNoAuxPortWithoutTimeouts) {
  // i8042_controller_check, i8042_controller_selftest
  ASSERT_EQ(flush(), 0);
  uint8_t param = 0;
  ASSERT_EQ(command(&param, 0x01AA), 0);
  EXPECT_EQ(param, kSelfTestOk);
  // i8042_controller_init
  uint8_t ctr[2];
  ASSERT_EQ(command(&ctr[0], 0x0120), 0);
  ASSERT_EQ(command(&ctr[1], 0x0120), 0);
  EXPECT_EQ(ctr[0], ctr[1]);
  uint8_t c = ctr[0];
  EXPECT_NE(ctl_.read_status() & kStatusKeylock, 0);  // no "Keylock active" warning
  EXPECT_EQ(c & kCtrXlate, 0);                        // Linux goes direct: scan code set 2
  c = (c | kCtrKbdDis) & ~kCtrKbdInt;
  ASSERT_EQ(command(&c, 0x1060), 0);
  ASSERT_EQ(flush(), 0);

  // i8042_check_aux
  ASSERT_EQ(flush(), 0);
  param = 0x5A;
  int retval = command(&param, 0x11D3);
  ASSERT_TRUE(retval != 0 || param != 0x5A) << "AUX loopback must not look like a PS/2 AUX port";
  int aux_test = command(&param, 0x01A9);
  bool no_aux = aux_test != 0 || (param != 0 && param != 0xFA && param != 0xFF);
  EXPECT_TRUE(no_aux);
  EXPECT_EQ(timeouts_, 0);

  // i8042_setup_kbd -> i8042_enable_kbd_port. Anything left over from the AUX probe arrives
  // as an interrupt before the serio port exists and is dropped by i8042_interrupt.
  c = (c & ~kCtrKbdDis) | kCtrKbdInt;
  ASSERT_EQ(command(&c, 0x1060), 0);
  EXPECT_LE(drain().size(), 1u);
  EXPECT_FALSE(irq_.level());

  // atkbd_probe, atkbd_select_set (set 2, nothing sent), atkbd_reset_state, atkbd_activate
  EXPECT_EQ(kbd(kKbdGetId), (Bytes{kKbdAck, kKbdIdByte1, kKbdIdByte2}));
  EXPECT_EQ(kbd(kKbdDisable), (Bytes{kKbdAck}));
  EXPECT_EQ(kbd(kKbdSetLeds), (Bytes{kKbdAck}));
  EXPECT_EQ(kbd(0x00), (Bytes{kKbdAck}));
  EXPECT_EQ(kbd(kKbdSetTypematic), (Bytes{kKbdAck}));
  EXPECT_EQ(kbd(0x00), (Bytes{kKbdAck}));
  EXPECT_EQ(kbd(kKbdEnable), (Bytes{kKbdAck}));
  EXPECT_EQ(resets_, 0);
  EXPECT_FALSE(irq_.has_repeats());
}

TEST_F(I8042Test, KeyboardResetAndOtherCommands) {
  EXPECT_EQ(kbd(kKbdReset), (Bytes{kKbdAck, kKbdBatOk}));
  EXPECT_EQ(kbd(kKbdEcho), (Bytes{kKbdEcho}));
  EXPECT_EQ(kbd(kKbdScanCodeSet), (Bytes{kKbdAck}));
  EXPECT_EQ(kbd(0x00), (Bytes{kKbdAck, 0x02}));
  EXPECT_EQ(kbd(kKbdSetDefaults), (Bytes{kKbdAck}));
  EXPECT_EQ(kbd(0xFB), (Bytes{kKbdAck}));
  EXPECT_EQ(kbd(0x12), (Bytes{kKbdResend}));
}

TEST_F(I8042Test, TranslatedModeReportsTheTranslatedId) {
  ctl_.write_command(kCmdWriteRam);
  ctl_.write_data(kCtrKbdInt | kCtrSys | kCtrXlate);
  EXPECT_EQ(kbd(kKbdGetId), (Bytes{kKbdAck, kKbdIdByte1, 0x41}));
}

TEST_F(I8042Test, PulsingTheResetLineCallsOnReset) {
  ctl_.write_command(kCmdPulseReset);
  EXPECT_EQ(resets_, 1);
  ctl_.write_command(0xFF);  // pulses nothing
  ctl_.write_command(0xF1);  // pulses bits 3:1 only
  EXPECT_EQ(resets_, 1);
  ctl_.write_command(0xF0);  // pulses all four, bit 0 included
  EXPECT_EQ(resets_, 2);
  ctl_.write_command(kCmdWriteOutputPort);
  ctl_.write_data(kOutputPortReset | kOutputPortA20);
  EXPECT_EQ(resets_, 2);
  ctl_.write_command(kCmdWriteOutputPort);
  ctl_.write_data(kOutputPortA20);  // reset bit low
  EXPECT_EQ(resets_, 3);
  EXPECT_EQ(ctl_.stats().reset_requests, 3u);
  ctl_.write_data(0xFE);  // a keyboard command, not a controller one
  EXPECT_EQ(resets_, 3);
}

TEST_F(I8042Test, ControllerCommandsAndStatus) {
  ctl_.write_command(kCmdKbdTest);
  EXPECT_NE(ctl_.read_status() & kStatusCmd, 0);
  EXPECT_EQ(drain(), (Bytes{kInterfaceTestOk}));
  ctl_.write_command(kCmdWriteKbdOutput);  // the driver's keyboard loop-back
  ctl_.write_data(0xA5);
  EXPECT_EQ(ctl_.read_status() & kStatusCmd, 0);
  EXPECT_TRUE(irq_.level());  // CTR.KBDINT is on by default
  EXPECT_EQ(drain(), (Bytes{0xA5}));
  ctl_.write_command(kCmdWriteRam + 5);
  ctl_.write_data(0x77);
  ctl_.write_command(kCmdReadRam + 5);
  EXPECT_EQ(drain(), (Bytes{0x77}));
  ctl_.write_command(kCmdAuxDisable);
  ctl_.write_command(kCmdReadRam);
  EXPECT_NE(drain().at(0) & kCtrAuxDis, 0);
  ctl_.write_command(kCmdReadOutputPort);
  EXPECT_EQ(drain(), (Bytes{kOutputPortReset | kOutputPortA20}));
  ctl_.write_command(kCmdWriteAux);
  ctl_.write_data(0xFF);  // to the absent mouse
  EXPECT_EQ(ctl_.stats().aux_bytes_dropped, 1u);
  EXPECT_EQ(drain(), Bytes{});
  ctl_.write_command(0xA1);
  EXPECT_EQ(ctl_.stats().unknown_commands, 1u);
  EXPECT_EQ(ctl_.read_data(), kOutputPortReset | kOutputPortA20);  // empty: the last byte again
}

TEST_F(I8042Test, CtrlAltDelInSet2AndTranslatedSet1) {
  ASSERT_TRUE(ctl_.trigger_ctrl_alt_del());
  EXPECT_EQ(drain(), (Bytes{0x14, 0x11, 0xE0, 0x71, 0xE0, 0xF0, 0x71, 0xF0, 0x11, 0xF0, 0x14}));
  EXPECT_EQ(irq_.rising_edges(), 11u);

  ctl_.write_command(kCmdWriteRam);
  ctl_.write_data(kCtrKbdInt | kCtrSys | kCtrXlate);
  ASSERT_TRUE(ctl_.trigger_ctrl_alt_del());
  EXPECT_EQ(drain(), (Bytes{0x1D, 0x38, 0xE0, 0x53, 0xE0, 0xD3, 0xB8, 0x9D}));
}

TEST_F(I8042Test, CtrlAltDelRespectsKeyboardAndInterfaceState) {
  kbd(kKbdDisable);
  EXPECT_FALSE(ctl_.trigger_ctrl_alt_del());  // scanning off
  kbd(kKbdEnable);
  ctl_.write_command(kCmdKbdDisable);
  EXPECT_TRUE(ctl_.trigger_ctrl_alt_del());
  EXPECT_EQ(ctl_.read_status() & kStatusObf, 0);  // held in the keyboard while disabled
  EXPECT_FALSE(ctl_.trigger_ctrl_alt_del());      // and its buffer has no room for another
  ctl_.write_command(kCmdKbdEnable);
  EXPECT_EQ(drain().size(), 11u);
}

TEST_F(I8042Test, NoIrqWithKbdIntOff) {
  ctl_.write_command(kCmdWriteRam);
  ctl_.write_data(kCtrSys);
  ctl_.trigger_ctrl_alt_del();
  EXPECT_NE(ctl_.read_status() & kStatusObf, 0);
  EXPECT_FALSE(irq_.level());
  EXPECT_EQ(irq_.rising_edges(), 0u);
}

TEST(I8042Port, TwoRangesOnTheBusShareOneController) {
  int resets = 0;
  auto ctl = std::make_shared<I8042>(IrqLine{}, [&] { ++resets; });
  Bus pio("pio");
  ASSERT_TRUE(insert_i8042(pio, ctl));
  uint8_t v = kCmdSelfTest;
  pio.write(x86::kI8042CommandPort, std::span<const uint8_t>(&v, 1));
  pio.read(x86::kI8042CommandPort, std::span<uint8_t>(&v, 1));
  EXPECT_NE(v & kStatusObf, 0);
  pio.read(x86::kI8042DataPort, std::span<uint8_t>(&v, 1));
  EXPECT_EQ(v, kSelfTestOk);
  v = kCmdPulseReset;
  pio.write(x86::kI8042CommandPort, std::span<const uint8_t>(&v, 1));
  EXPECT_EQ(resets, 1);
  EXPECT_EQ(pio.find(x86::kI8042DataPort + 1).device, nullptr);  // port 0x61 stays free
}

}  // namespace
}  // namespace tern
