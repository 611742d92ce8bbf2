#include "devices/legacy/serial8250.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "devices/legacy/serial_registers.h"
#include "devices/testing/fake_irq_line.h"

namespace tern {
namespace {

using namespace uart;

class Serial8250Test : public ::testing::Test {
 protected:
  explicit Serial8250Test(size_t rx_capacity = Serial8250::kDefaultRxCapacity)
      : uart_(
            irq_.line(), [this](std::span<const uint8_t> b) { out_.append(b.begin(), b.end()); },
            rx_capacity) {}

  uint8_t in(uint64_t reg) {
    uint8_t v = 0;
    uart_.read(reg, std::span<uint8_t>(&v, 1));
    return v;
  }
  void out(uint64_t reg, uint8_t v) { uart_.write(reg, std::span<const uint8_t>(&v, 1)); }
  size_t enqueue(const std::string& s) {
    return uart_.enqueue_input(
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
  }

  // Linux 8250_port.c autoconfig() and autoconfig_16550a(), register access for register
  // access (the existence test, the loopback test, the FIFO/IIR test, then the EFR, NS16550A,
  // TI16750 and XScale variant probes). Returns the port type Linux would settle on.
  std::string linux_autoconfig() {
    uint8_t scratch = in(kIer);
    out(kIer, 0);
    uint8_t scratch2 = in(kIer)&0x0F;
    out(kIer, 0x0F);
    uint8_t scratch3 = in(kIer)&0x0F;
    out(kIer, scratch);
    if (scratch2 != 0 || scratch3 != 0x0F) return "none (IER test)";

    uint8_t save_mcr = in(kMcr);
    uint8_t save_lcr = in(kLcr);
    out(kMcr, kMcrLoop | kMcrOut2 | kMcrRts);
    uint8_t status1 = in(kMsr)&0xF0;
    out(kMcr, save_mcr);
    if (status1 != (kMsrDcd | kMsrCts)) return "none (loopback test)";

    out(kLcr, 0xBF);  // UART_LCR_CONF_MODE_B
    out(2, 0);        // UART_EFR
    out(kLcr, 0);
    out(kIirFcr, kFcrEnableFifo);
    uint8_t scratch4 = in(kIirFcr);
    std::string type;
    switch (scratch4 >> 6) {
      case 0:
        type = "16450";
        break;
      case 1:
        type = "unknown";
        break;
      case 2:
        type = "16550";
        break;
      case 3:
        type = autoconfig_16550a();
        break;
    }
    out(kLcr, save_lcr);
    // Reset the UART as autoconfig() does.
    out(kMcr, save_mcr);
    out(kIirFcr, kFcrEnableFifo);
    out(kIirFcr, kFcrEnableFifo | kFcrClearRcvr | kFcrClearXmit);
    out(kIirFcr, 0);
    in(kRbrThr);
    out(kIer, 0);
    return type;
  }

  std::string autoconfig_16550a() {
    out(kLcr, 0x80);  // UART_LCR_CONF_MODE_A
    if (in(2) == 0) return "16650 (EFR with DLAB)";
    out(kLcr, 0xBF);
    if (in(2) == 0) return "EFRv2";
    out(kLcr, 0);
    uint8_t status1 = in(kMcr);
    out(kLcr, 0xE0);
    uint8_t status2 = in(2);  // EXCR1 on National SuperIO parts
    if (!((status2 ^ status1) & kMcrLoop)) {
      out(kLcr, 0);
      out(kMcr, status1 ^ kMcrLoop);
      out(kLcr, 0xE0);
      status2 = in(2);
      out(kLcr, 0);
      out(kMcr, status1);
      if ((status2 ^ status1) & kMcrLoop) return "NS16550A";
    }
    out(kLcr, 0);
    out(kIirFcr, kFcrEnableFifo | 0x20);  // UART_FCR7_64BYTE
    status1 = in(kIirFcr)&0xE0;
    out(kIirFcr, kFcrEnableFifo);
    out(kLcr, 0x80);
    out(kIirFcr, kFcrEnableFifo | 0x20);
    status2 = in(kIirFcr)&0xE0;
    out(kIirFcr, kFcrEnableFifo);
    out(kLcr, 0);
    if (status1 == 0xC0 && status2 == 0xE0) return "16750";
    uint8_t iersave = in(kIer);
    out(kIer, iersave & ~0x40);
    if (!(in(kIer)&0x40)) {
      out(kIer, iersave | 0x40);
      if (in(kIer)&0x40) return "XScale";
    }
    out(kIer, iersave);
    return "16550A";
  }

  testing::FakeIrqLine irq_;
  std::string out_;
  Serial8250 uart_;
};

TEST_F(Serial8250Test, ThrWritesReachTheConsole) {
  for (char c : std::string("hi\r\n")) out(kRbrThr, static_cast<uint8_t>(c));
  EXPECT_EQ(out_, "hi\r\n");
  EXPECT_EQ(uart_.stats().tx_bytes, 4u);
  EXPECT_EQ(in(kLsr) & (kLsrThre | kLsrTemt), kLsrThre | kLsrTemt);
  EXPECT_FALSE(irq_.level());  // IER is 0: polled console output raises nothing
}

TEST_F(Serial8250Test, LinuxDetectsA16550A) {
  EXPECT_EQ(linux_autoconfig(), "16550A");
  EXPECT_EQ(out_, "");  // the probe transmits nothing
}

TEST_F(Serial8250Test, LoopbackReflectsMcrIntoMsrAndThrIntoRbr) {
  out(kMcr, kMcrLoop | kMcrDtr | kMcrOut1);
  uint8_t msr = in(kMsr);
  EXPECT_EQ(msr & 0xF0, kMsrDsr | kMsrRi);
  EXPECT_NE(msr & kMsrDeltaMask, 0);     // CTS and DCD dropped on entering loopback
  EXPECT_EQ(in(kMsr)&kMsrDeltaMask, 0);  // deltas clear on read
  out(kMcr, kMcrLoop | kMcrDtr);         // OUT1 (RI) falls: trailing edge
  EXPECT_EQ(in(kMsr)&kMsrTeri, kMsrTeri);

  EXPECT_EQ(uart_.input_space(), 0u);  // serial input is disconnected in loopback
  EXPECT_EQ(enqueue("x"), 0u);
  out(kRbrThr, 'Z');
  EXPECT_EQ(out_, "");
  EXPECT_EQ(in(kLsr)&kLsrDr, kLsrDr);
  EXPECT_EQ(in(kRbrThr), 'Z');
  EXPECT_EQ(in(kLsr)&kLsrDr, 0);

  out(kMcr, 0);
  EXPECT_EQ(in(kMsr)&0xF0, kMsrDcd | kMsrDsr | kMsrCts);
  out(kIer, kIerRdi);
  EXPECT_GT(uart_.input_space(), 0u);
}

TEST_F(Serial8250Test, HostInputIsHeldBackUntilTheDriverListens) {
  // Before the driver enables the receive interrupt (it clears the FIFOs while starting up),
  // the console input thread must wait rather than hand over bytes that would be lost.
  EXPECT_EQ(uart_.input_space(), 0u);
  out(kIer, kIerRdi);
  EXPECT_GT(uart_.input_space(), 0u);
  out(kIer, 0);
  EXPECT_EQ(uart_.input_space(), 0u);
}

TEST_F(Serial8250Test, ReceivedDataSetsDrAndTheIrqUntilRead) {
  out(kIirFcr, kFcrEnableFifo);
  EXPECT_EQ(enqueue("ok"), 2u);
  EXPECT_EQ(in(kLsr)&kLsrDr, kLsrDr);
  EXPECT_FALSE(irq_.level());  // RDI not enabled yet
  out(kIer, kIerRdi);
  EXPECT_TRUE(irq_.level());
  EXPECT_EQ(in(kIirFcr), kIirFifoEnabled | kIirRdi);
  EXPECT_EQ(in(kRbrThr), 'o');
  EXPECT_TRUE(irq_.level());
  EXPECT_EQ(in(kRbrThr), 'k');
  EXPECT_FALSE(irq_.level());
  EXPECT_EQ(in(kLsr)&kLsrDr, 0);
  EXPECT_EQ(in(kIirFcr), kIirFifoEnabled | kIirNoInt);
  EXPECT_EQ(uart_.stats().rx_bytes, 2u);
  EXPECT_FALSE(irq_.has_repeats());
}

TEST_F(Serial8250Test, FcrClearsTheReceiveFifo) {
  out(kIirFcr, kFcrEnableFifo);
  enqueue("abc");
  out(kIirFcr, kFcrEnableFifo | kFcrClearRcvr);
  EXPECT_EQ(in(kLsr)&kLsrDr, 0);
  enqueue("d");
  out(kIirFcr, 0);  // disabling the FIFOs clears them too
  EXPECT_EQ(in(kLsr)&kLsrDr, 0);
  EXPECT_EQ(in(kIirFcr)&kIirFifoEnabled, 0);
}

// serial8250_do_startup(): the UART_BUG_THRE and UART_BUG_TXEN tests.
TEST_F(Serial8250Test, ThreInterruptSemanticsMatchLinuxStartupTests) {
  out(kIer, kIerThri);
  uint8_t iir1 = in(kIirFcr);
  out(kIer, 0);
  out(kIer, kIerThri);
  uint8_t iir = in(kIirFcr);
  out(kIer, 0);
  EXPECT_EQ(iir1 & kIirNoInt, 0) << "THRE must be raised when IER.THRI is set";
  EXPECT_EQ(iir & kIirNoInt, 0) << "THRE must be re-raised when IER.THRI is set again";

  out(kIer, kIerThri);
  uint8_t lsr = in(kLsr);
  iir = in(kIirFcr);
  out(kIer, 0);
  EXPECT_FALSE((lsr & kLsrTemt) && (iir & kIirNoInt)) << "would set UART_BUG_TXEN";
  EXPECT_FALSE(irq_.level());
  EXPECT_FALSE(irq_.has_repeats());
}

TEST_F(Serial8250Test, IirReadAcknowledgesThreOnlyWhenItIsTheSource) {
  out(kIer, kIerRdi | kIerThri);
  enqueue("x");
  EXPECT_EQ(in(kIirFcr)&kIirIdMask, kIirRdi);  // RDA outranks THRE: THRE stays pending
  in(kRbrThr);
  EXPECT_EQ(in(kIirFcr)&kIirIdMask, kIirThri);  // now THRE, and this read acknowledges it
  EXPECT_EQ(in(kIirFcr)&kIirIdMask, kIirNoInt);
  EXPECT_FALSE(irq_.level());
}

// The interrupt-driven transmit path: start_tx sets IER.THRI, the handler reads IIR and writes
// THR, and each THR write must give an edge-triggered IOAPIC pin a new edge.
TEST_F(Serial8250Test, InterruptDrivenTransmitGetsAnEdgePerByte) {
  out(kIirFcr, kFcrEnableFifo);
  out(kIer, kIerRlsi | kIerRdi);
  EXPECT_FALSE(irq_.level());
  out(kIer, kIerRlsi | kIerRdi | kIerThri);  // __start_tx
  EXPECT_EQ(irq_.rising_edges(), 1u);
  EXPECT_EQ(in(kIirFcr)&kIirIdMask, kIirThri);  // handler: THRE
  EXPECT_FALSE(irq_.level());
  EXPECT_EQ(in(kLsr)&kLsrThre, kLsrThre);
  out(kRbrThr, 'a');  // serial8250_tx_chars
  out(kRbrThr, 'b');
  EXPECT_EQ(irq_.rising_edges(), 3u);
  EXPECT_TRUE(irq_.level());
  EXPECT_EQ(in(kIirFcr)&kIirIdMask, kIirThri);  // next pass: nothing left to send
  out(kIer, kIerRlsi | kIerRdi);                // __stop_tx
  EXPECT_EQ(in(kIirFcr)&kIirIdMask, kIirNoInt);
  EXPECT_FALSE(irq_.level());
  EXPECT_EQ(out_, "ab");
  EXPECT_FALSE(irq_.has_repeats());
}

TEST_F(Serial8250Test, ModemStatusInterruptInLoopback) {
  out(kMcr, kMcrLoop);
  in(kMsr);
  out(kIer, kIerMsi);
  EXPECT_FALSE(irq_.level());
  out(kMcr, kMcrLoop | kMcrRts);
  EXPECT_TRUE(irq_.level());
  EXPECT_EQ(in(kIirFcr)&kIirIdMask, kIirMsi);
  EXPECT_EQ(in(kMsr), kMsrCts | kMsrDcts);
  EXPECT_FALSE(irq_.level());
}

TEST_F(Serial8250Test, DivisorLatchAndScratch) {
  out(kIer, 0x05);
  out(kLcr, kLcrDlab | 0x03);
  out(kRbrThr, 0x01);  // DLL: 115200 baud
  out(kIer, 0x00);     // DLM
  EXPECT_EQ(in(kRbrThr), 0x01);
  EXPECT_EQ(in(kIer), 0x00);
  out(kLcr, 0x03);
  EXPECT_EQ(in(kIer), 0x05);  // IER untouched by the DLM write
  EXPECT_EQ(out_, "");        // the DLL write transmitted nothing
  out(kScr, 0x5A);
  EXPECT_EQ(in(kScr), 0x5A);
  EXPECT_EQ(in(kLcr), 0x03);
}

TEST_F(Serial8250Test, WideAccessesSplitIntoBytes) {
  out(kIer, 0x0F);
  enqueue("Q");
  std::array<uint8_t, 2> two{};
  uart_.read(kRbrThr, two);
  EXPECT_EQ(two[0], 'Q');
  EXPECT_EQ(two[1], 0x0F);
  std::array<uint8_t, 4> four{};
  uart_.read(kScr, four);  // only SCR is ours
  EXPECT_EQ(four[1], 0xFF);
  EXPECT_EQ(four[3], 0xFF);
}

class SmallSerialTest : public Serial8250Test {
 protected:
  SmallSerialTest() : Serial8250Test(4) {}
};

TEST_F(SmallSerialTest, FullReceiverDropsCountsAndFlagsOverrun) {
  out(kIer, kIerRlsi | kIerRdi);
  EXPECT_EQ(uart_.input_space(), 4u);
  EXPECT_EQ(enqueue("abcdef"), 4u);
  EXPECT_EQ(uart_.input_space(), 0u);
  EXPECT_EQ(uart_.stats().rx_dropped, 2u);
  EXPECT_EQ(uart_.stats().rx_bytes, 4u);
  EXPECT_TRUE(irq_.level());
  EXPECT_EQ(in(kIirFcr)&kIirIdMask, kIirRlsi);
  EXPECT_EQ(in(kLsr)&kLsrOe, kLsrOe);
  EXPECT_EQ(in(kLsr)&kLsrOe, 0);  // cleared by the read
  EXPECT_EQ(in(kIirFcr)&kIirIdMask, kIirRdi);  // only the data-available interrupt is left
  out(kIer, kIerRlsi);
  EXPECT_FALSE(irq_.level());
  std::string got;
  while (in(kLsr)&kLsrDr) got += static_cast<char>(in(kRbrThr));
  EXPECT_EQ(got, "abcd");
}

}  // namespace
}  // namespace tern
