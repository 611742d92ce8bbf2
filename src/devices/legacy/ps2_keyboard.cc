#include "devices/legacy/ps2_keyboard.h"

#include <array>
#include <span>

#include "devices/legacy/i8042_registers.h"

namespace tern {

using namespace i8042;

void Ps2Keyboard::set_defaults() {
  scan_set_ = 2;
  typematic_ = 0x2B;
}

void Ps2Keyboard::receive(uint8_t byte) {
  if (pending_) {
    uint8_t cmd = *pending_;
    pending_.reset();
    send(kKbdAck);
    switch (cmd) {
      case kKbdSetLeds:
        leds_ = byte & 0x07;
        break;
      case kKbdSetTypematic:
        typematic_ = byte & 0x7F;
        break;
      case kKbdScanCodeSet:
        if (byte == 0) {
          send(scan_set_);  // query
        } else if (byte == 1 || byte == 2) {
          scan_set_ = byte;
        }
        // Set 3 is not supported: acknowledged but ignored, as on many real keyboards (Linux
        // reads the set back and falls back to set 2).
        break;
    }
    return;
  }
  switch (byte) {
    case kKbdSetLeds:
    case kKbdSetTypematic:
    case kKbdScanCodeSet:
      send(kKbdAck);
      pending_ = byte;
      break;
    case kKbdEcho:
      send(kKbdEcho);
      break;
    case kKbdGetId:
      send(kKbdAck);
      send(kKbdIdByte1);
      send(kKbdIdByte2);
      break;
    case kKbdEnable:
      out_.clear();
      send(kKbdAck);
      scanning_ = true;
      break;
    case kKbdDisable:
      out_.clear();
      send(kKbdAck);
      set_defaults();
      scanning_ = false;
      break;
    case kKbdSetDefaults:
      out_.clear();
      send(kKbdAck);
      set_defaults();
      break;
    case kKbdReset:
      out_.clear();
      set_defaults();
      leds_ = 0;
      scanning_ = true;
      send(kKbdAck);
      send(kKbdBatOk);
      break;
    default:
      // 0xF7..0xFD (set-3 key types) and 0xFE (resend) are acknowledged; anything else is not
      // a command and asks the host to resend.
      send(byte >= 0xF7 ? kKbdAck : kKbdResend);
      break;
  }
}

bool Ps2Keyboard::type_ctrl_alt_del() {
  // Left Ctrl, left Alt, Delete: make codes, then break codes in reverse order.
  static constexpr std::array<uint8_t, 11> kSet2 = {0x14, 0x11, 0xE0, 0x71, 0xE0, 0xF0,
                                                    0x71, 0xF0, 0x11, 0xF0, 0x14};
  static constexpr std::array<uint8_t, 8> kSet1 = {0x1D, 0x38, 0xE0, 0x53, 0xE0, 0xD3, 0xB8, 0x9D};
  std::span<const uint8_t> codes =
      scan_set_ == 1 ? std::span<const uint8_t>(kSet1) : std::span<const uint8_t>(kSet2);
  if (!scanning_ || out_.free() < codes.size()) return false;
  out_.push(codes);
  return true;
}

}  // namespace tern
