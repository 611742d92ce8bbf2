// I8042: the PS/2 controller (data port 0x60, command/status port 0x64, keyboard IRQ 1).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>

#include "base/log.h"
#include "devices/byte_ring.h"
#include "devices/irq_line.h"
#include "devices/legacy/ps2_keyboard.h"
#include "snapshot/codec.h"

namespace tern {

/// An 8042-style keyboard controller with a keyboard and no AUX (mouse) port, enough for
/// Linux's i8042 and atkbd drivers to probe and for the guest to request a reset (command 0xFE,
/// or an output-port write with bit 0 clear).
///
/// It is not a BusDevice itself: its two ports are not contiguous, so it is inserted as two
/// I8042Port facades (see insert_i8042()). Starts with CTR = KBDINT | SYS (no translation: Linux
/// then drives the keyboard in scan code set 2). Every byte placed in the output buffer raises
/// IRQ 1 if CTR.KBDINT is set, with a fresh edge per byte. Thread-safe; the IrqLine is called
/// with the controller's lock held, on_reset without it.
///
/// No AUX port: command 0xD3 (write AUX output buffer) echoes its byte on the keyboard channel,
/// which Linux's AUX probe treats as "no AUX loop" (without waiting for a timeout), and 0xA9
/// (AUX interface test) answers 0x02 (clock line stuck high: nothing connected).
class I8042 {
 public:
  using Callback = std::function<void()>;

  struct Stats {
    uint64_t reset_requests = 0;
    uint64_t unknown_commands = 0;
    uint64_t aux_bytes_dropped = 0;  ///< Bytes sent to the absent AUX device (0xD4).
  };

  /// `kbd_irq` is IRQ 1; `on_reset` is called (from a vCPU thread) when the guest pulses the
  /// CPU reset line: the guest's reboot request.
  I8042(IrqLine kbd_irq, Callback on_reset);

  /// Port 0x60 read: the output buffer (the last byte again if empty).
  uint8_t read_data();
  /// Port 0x60 write: a parameter of the pending controller command, else a keyboard command.
  void write_data(uint8_t value);
  /// Port 0x64 read: the status register.
  uint8_t read_status();
  /// Port 0x64 write: a controller command.
  void write_command(uint8_t value);

  /// Makes the keyboard type Ctrl+Alt+Del (in set 2, translated to set 1 when CTR.XLATE is
  /// set: what atkbd expects in either mode). False if the keyboard is disabled or its buffer
  /// is full.
  bool trigger_ctrl_alt_del();

  [[nodiscard]] Stats stats() const;

  /// Snapshot: controller RAM (CTR at byte 0), output buffer and reply queue, pending command,
  /// output port, status flags, translation state and the keyboard's state and buffer. Version 1.
  void save_state(snap::ByteWriter& w) const;
  /// Restores what save_state() wrote; errors name "i8042" and the field. The IRQ line is not
  /// driven (its level comes with the interrupt controller's state).
  [[nodiscard]] Result<void> restore_state(snap::ByteReader& r);

 private:
  uint8_t& ctr() { return ram_[0]; }
  bool handle_command(uint8_t cmd);
  bool handle_parameter(uint8_t cmd, uint8_t value);
  void reply(uint8_t byte);
  std::optional<uint8_t> translate(uint8_t byte);
  void refill();
  void update_irq();

  mutable std::mutex mu_;
  IrqPin irq_;
  Callback on_reset_;
  Ps2Keyboard kbd_;
  std::array<uint8_t, 32> ram_{};  // controller RAM; byte 0 is the CTR
  ByteRing replies_;               // controller replies waiting for the output buffer
  std::optional<uint8_t> obuf_;    // the output buffer (OBF when set)
  uint8_t last_data_ = 0;
  std::optional<uint8_t> pending_;  // command waiting for its parameter on port 0x60
  uint8_t output_port_;
  bool last_write_was_command_ = false;
  bool xlate_break_ = false;  // translation saw a set-2 0xF0 (break) prefix
  Stats stats_;
  RateLimit log_limit_{5};
};

}  // namespace tern
