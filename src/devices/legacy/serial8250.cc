#include "devices/legacy/serial8250.h"

#include <utility>

#include "devices/legacy/serial_registers.h"

namespace tern {

using namespace uart;

namespace {
// What the (absent) modem reports outside loopback: carrier, data set ready, clear to send.
constexpr uint8_t kIdleModemLines = kMsrDcd | kMsrDsr | kMsrCts;
}  // namespace

Serial8250::Serial8250(IrqLine irq, ByteSink out, size_t rx_capacity)
    : ByteIoDevice(kRegisterCount), irq_(std::move(irq)), out_(std::move(out)), rx_(rx_capacity) {}

size_t Serial8250::input_space() {
  std::lock_guard lock(mu_);
  // Until the driver enables the receive interrupt nobody is listening: bytes sent now would be
  // lost to the FIFO clears of the driver's start-up (e.g. piped input at boot). Hold them back.
  if (loopback() || (ier_ & uart::kIerRdi) == 0) return 0;
  return rx_.free();
}

size_t Serial8250::enqueue_input(std::span<const uint8_t> bytes) {
  std::lock_guard lock(mu_);
  // In loopback mode the serial input is disconnected from the outside world.
  size_t accepted = loopback() ? 0 : rx_.push(bytes);
  stats_.rx_bytes += accepted;
  if (accepted < bytes.size()) receive_overrun(bytes.size() - accepted);
  update_irq();
  return accepted;
}

Serial8250::Stats Serial8250::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

uint8_t Serial8250::read_byte(uint64_t offset) {
  std::lock_guard lock(mu_);
  uint8_t v = 0;
  switch (offset) {
    case kRbrThr:
      if (dlab()) return dll_;
      if (!rx_.empty()) rbr_ = rx_.pop_front();
      v = rbr_;
      break;
    case kIer:
      return dlab() ? dlm_ : ier_;
    case kIirFcr:
      v = iir();
      // Reading IIR while it reports THRE acknowledges that interrupt (datasheet table 4).
      if ((v & kIirIdMask) == kIirThri) thre_pending_ = false;
      break;
    case kLcr:
      return lcr_;
    case kMcr:
      return mcr_;
    case kLsr:
      v = lsr();
      lsr_errors_ = 0;
      break;
    case kMsr:
      v = modem_lines() | msr_delta_;
      msr_delta_ = 0;
      break;
    case kScr:
      return scr_;
  }
  update_irq();
  return v;
}

void Serial8250::write_byte(uint64_t offset, uint8_t value) {
  std::lock_guard lock(mu_);
  switch (offset) {
    case kRbrThr:
      if (dlab()) {
        dll_ = value;
      } else {
        transmit(value);
      }
      break;
    case kIer:
      if (dlab()) {
        dlm_ = value;
      } else {
        write_ier(value);
      }
      break;
    case kIirFcr:
      write_fcr(value);
      break;
    case kLcr:
      lcr_ = value;
      break;
    case kMcr:
      write_mcr(value);
      break;
    case kLsr:
    case kMsr:
      // Read-only status registers (writes are for factory test on real parts).
      TERN_LOG_RATELIMITED(log_limit_, debug, "serial0: ignored write {:#04x} to offset {}", value,
                           offset);
      break;
    case kScr:
      scr_ = value;
      break;
  }
  update_irq();
}

uint8_t Serial8250::iir() const {
  uint8_t id = kIirNoInt;
  if ((ier_ & kIerRlsi) && lsr_errors_ != 0) {
    id = kIirRlsi;
  } else if ((ier_ & kIerRdi) && !rx_.empty()) {
    id = kIirRdi;
  } else if ((ier_ & kIerThri) && thre_pending_) {
    id = kIirThri;
  } else if ((ier_ & kIerMsi) && msr_delta_ != 0) {
    id = kIirMsi;
  }
  return id | ((fcr_ & kFcrEnableFifo) ? kIirFifoEnabled : 0);
}

uint8_t Serial8250::lsr() const {
  // The transmitter never holds a byte, so THRE and TEMT are always set.
  return (rx_.empty() ? 0 : kLsrDr) | lsr_errors_ | kLsrThre | kLsrTemt;
}

uint8_t Serial8250::modem_lines() const {
  if (!loopback()) return kIdleModemLines;
  // Loopback: the modem control outputs are wired to the modem status inputs.
  return ((mcr_ & kMcrDtr) ? kMsrDsr : 0) | ((mcr_ & kMcrRts) ? kMsrCts : 0) |
         ((mcr_ & kMcrOut1) ? kMsrRi : 0) | ((mcr_ & kMcrOut2) ? kMsrDcd : 0);
}

void Serial8250::transmit(uint8_t byte) {
  // THR is full for an instant: the THRE interrupt drops, then rises again once the byte is
  // "sent". The dip gives edge-triggered interrupt inputs one edge per byte, which is what the
  // driver's interrupt-driven transmit loop waits for.
  thre_pending_ = false;
  update_irq();
  ++stats_.tx_bytes;
  if (loopback()) {
    if (!rx_.push(byte)) receive_overrun(1);
  } else if (out_) {
    out_(std::span<const uint8_t>(&byte, 1));
  }
  thre_pending_ = true;
}

void Serial8250::receive_overrun(size_t dropped) {
  stats_.rx_dropped += dropped;
  lsr_errors_ |= kLsrOe;
  TERN_LOG_RATELIMITED(log_limit_, debug, "serial0: receiver full, dropped {} bytes", dropped);
}

void Serial8250::write_ier(uint8_t value) {
  uint8_t changed = (ier_ ^ value) & kIerThri;
  ier_ = value & kIerMask;
  // Enabling the THRE interrupt while THR is empty (always, here) raises it even if an earlier
  // one was acknowledged; disabling it forgets it. This is the rising-edge behaviour of real
  // 16550As that Linux's THRE test (UART_BUG_THRE) and console write path rely on.
  if (changed) thre_pending_ = (ier_ & kIerThri) != 0;
}

void Serial8250::write_fcr(uint8_t value) {
  bool enable = (value & kFcrEnableFifo) != 0;
  // Toggling the FIFO enable clears both FIFOs; so do the clear bits. The transmit FIFO is
  // always empty here.
  if (enable != ((fcr_ & kFcrEnableFifo) != 0) || (value & kFcrClearRcvr)) rx_.clear();
  // The other FCR bits only take effect together with the enable bit.
  fcr_ = enable ? (value & kFcrStoredMask) : 0;
}

void Serial8250::write_mcr(uint8_t value) {
  uint8_t before = modem_lines();
  mcr_ = value & kMcrMask;
  uint8_t after = modem_lines();
  uint8_t changed = before ^ after;
  if (changed & kMsrCts) msr_delta_ |= kMsrDcts;
  if (changed & kMsrDsr) msr_delta_ |= kMsrDdsr;
  if (changed & kMsrDcd) msr_delta_ |= kMsrDdcd;
  if ((before & kMsrRi) && !(after & kMsrRi)) msr_delta_ |= kMsrTeri;  // trailing edge only
}

}  // namespace tern
