// Serial8250: a 16550A-compatible UART (COM1 at x86::kSerialPort, IRQ x86::kSerialIrq).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <span>
#include <string_view>

#include "base/log.h"
#include "devices/byte_ring.h"
#include "devices/console/byte_sink.h"
#include "devices/console/input_sink.h"
#include "devices/irq_line.h"
#include "devices/legacy/byte_io_device.h"
#include "devices/legacy/serial_registers.h"
#include "snapshot/codec.h"

namespace tern {

/// A 16550A UART as Linux's 8250 driver probes and drives it.
///
/// Transmission is instantaneous: a THR write hands the byte to the ByteSink (or, in MCR
/// loopback mode, to the receiver) and THRE/TEMT are set again at once. The receiver is a
/// bounded FIFO fed by enqueue_input(); bytes that do not fit are dropped, counted and flagged as
/// an overrun (LSR.OE). The receive-FIFO trigger level and character timeout are not modelled:
/// the receive interrupt is pending whenever data is available, which the driver handles the
/// same way. The IRQ output is not gated by MCR.OUT2 (as in QEMU and Firecracker).
///
/// Insert on the PIO bus with length kRegisterCount. Thread-safe; the IrqLine and the ByteSink
/// are called with the UART's lock held.
class Serial8250 final : public ByteIoDevice, public InputSink {
 public:
  static constexpr uint64_t kRegisterCount = uart::kRegisterCount;
  static constexpr size_t kDefaultRxCapacity = 4096;

  struct Stats {
    uint64_t tx_bytes = 0;    ///< Bytes the guest wrote to THR (loopback included).
    uint64_t rx_bytes = 0;    ///< Bytes accepted by enqueue_input().
    uint64_t rx_dropped = 0;  ///< Received bytes lost: FIFO full, or input during loopback.
  };

  /// `irq` is the UART's interrupt line; `out` receives transmitted bytes (may be empty: the
  /// bytes are then discarded); `rx_capacity` bounds the receive FIFO.
  Serial8250(IrqLine irq, ByteSink out, size_t rx_capacity = kDefaultRxCapacity);

  [[nodiscard]] std::string_view name() const override { return "serial0"; }

  [[nodiscard]] size_t input_space() override;
  size_t enqueue_input(std::span<const uint8_t> bytes) override;

  [[nodiscard]] Stats stats() const;

  /// Snapshot: every register (DLL/DLM, IER, FCR, LCR, MCR, SCR, RBR latch), pending LSR error
  /// and MSR delta bits, the THRE interrupt state and the receive FIFO bytes. Version 1.
  void save_state(snap::ByteWriter& w) const;
  /// Restores what save_state() wrote into a device built with the same rx capacity. Validates
  /// register bits and the FIFO length (≤ capacity); errors name "serial0" and the field. The IRQ
  /// line is not driven (its level comes with the interrupt controller's state).
  [[nodiscard]] Result<void> restore_state(snap::ByteReader& r);

 protected:
  uint8_t read_byte(uint64_t offset) override;
  void write_byte(uint64_t offset, uint8_t value) override;

 private:
  bool loopback() const { return (mcr_ & uart::kMcrLoop) != 0; }
  bool dlab() const { return (lcr_ & uart::kLcrDlab) != 0; }
  uint8_t iir() const;
  uint8_t lsr() const;
  uint8_t modem_lines() const;
  void transmit(uint8_t byte);
  void receive_overrun(size_t dropped);
  void write_ier(uint8_t value);
  void write_fcr(uint8_t value);
  void write_mcr(uint8_t value);
  void update_irq() { irq_.set((iir() & uart::kIirNoInt) == 0); }

  mutable std::mutex mu_;
  IrqPin irq_;
  ByteSink out_;
  ByteRing rx_;
  uint8_t rbr_ = 0;  // last byte read; what RBR returns when the FIFO is empty
  uint8_t ier_ = 0;
  uint8_t fcr_ = 0;
  uint8_t lcr_ = 0x03;  // 8N1
  uint8_t mcr_ = 0;
  uint8_t lsr_errors_ = 0;  // OE/PE/FE/BI until LSR is read
  uint8_t msr_delta_ = 0;   // DCTS/DDSR/TERI/DDCD until MSR is read
  uint8_t scr_ = 0;
  uint8_t dll_ = 0x0C;  // 9600 baud from the 1.8432 MHz clock
  uint8_t dlm_ = 0;
  bool thre_pending_ = false;  // THRE interrupt armed, not yet acknowledged by an IIR read
  Stats stats_;
  RateLimit log_limit_{5};
};

}  // namespace tern
