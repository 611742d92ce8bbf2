// Ps2Keyboard: the PS/2 keyboard behind the i8042's first port.
#pragma once

#include <cstdint>
#include <optional>

#include "base/result.h"
#include "devices/byte_ring.h"
#include "snapshot/codec.h"

namespace tern {

/// An MF2 keyboard without physical keys: it answers the host's commands (reset, identify,
/// LEDs, typematic, scan code set, enable/disable) and can be made to type Ctrl+Alt+Del.
/// It speaks its current scan code set (2 by default, 1 on request); the controller translates
/// set 2 to set 1 when its CTR says so. Not thread-safe: I8042 calls it under its own lock.
class Ps2Keyboard {
 public:
  static constexpr size_t kBufferSize = 16;  ///< Bytes the keyboard holds for the controller.

  Ps2Keyboard() : out_(kBufferSize) {}

  /// Handles one byte sent by the host (a command or a command's parameter).
  void receive(uint8_t byte);
  [[nodiscard]] bool has_output() const { return !out_.empty(); }
  /// The next byte for the controller. Precondition: has_output().
  uint8_t pop_output() { return out_.pop_front(); }

  /// Queues Ctrl+Alt+Del presses then releases (Del last pressed, first released). Returns
  /// false, queueing nothing, when scanning is disabled or the buffer lacks room.
  bool type_ctrl_alt_del();

  [[nodiscard]] uint8_t scan_code_set() const { return scan_set_; }
  [[nodiscard]] bool scanning() const { return scanning_; }
  [[nodiscard]] uint8_t leds() const { return leds_; }

  /// Snapshot of the keyboard (buffer, pending command, scan set, scanning, LEDs, typematic);
  /// part of I8042's state. Errors name "i8042 keyboard" and the field.
  void save_state(snap::ByteWriter& w) const;
  [[nodiscard]] Result<void> restore_state(snap::ByteReader& r);

 private:
  void send(uint8_t byte) { out_.push(byte); }
  void set_defaults();

  ByteRing out_;
  std::optional<uint8_t> pending_;  // command waiting for its parameter byte
  uint8_t scan_set_ = 2;
  bool scanning_ = true;
  uint8_t leds_ = 0;
  uint8_t typematic_ = 0x2B;  // 10.9 characters/s after 500 ms
};

}  // namespace tern
