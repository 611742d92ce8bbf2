#include "devices/legacy/i8042.h"

#include <utility>

#include "devices/legacy/i8042_registers.h"

namespace tern {

using namespace i8042;

I8042::I8042(IrqLine kbd_irq, Callback on_reset)
    : irq_(std::move(kbd_irq)),
      on_reset_(std::move(on_reset)),
      replies_(8),
      output_port_(kOutputPortReset | kOutputPortA20) {
  ctr() = kCtrKbdInt | kCtrSys;
}

uint8_t I8042::read_data() {
  std::lock_guard lock(mu_);
  if (obuf_) {
    last_data_ = *obuf_;
    obuf_.reset();
  }
  irq_.set(false);  // the byte is taken: the next one gets an edge of its own
  refill();
  update_irq();
  return last_data_;
}

void I8042::write_data(uint8_t value) {
  bool reset = false;
  {
    std::lock_guard lock(mu_);
    last_write_was_command_ = false;
    if (pending_) {
      uint8_t cmd = *pending_;
      pending_.reset();
      reset = handle_parameter(cmd, value);
    } else {
      kbd_.receive(value);
      ctr() &= ~kCtrKbdDis;  // sending to the keyboard enables its interface (as QEMU does)
    }
    refill();
    update_irq();
  }
  if (reset && on_reset_) on_reset_();
}

uint8_t I8042::read_status() {
  std::lock_guard lock(mu_);
  return (obuf_ ? kStatusObf : 0) | (ctr() & kCtrSys ? kStatusSys : 0) |
         (last_write_was_command_ ? kStatusCmd : 0) | kStatusKeylock;
}

void I8042::write_command(uint8_t value) {
  bool reset = false;
  {
    std::lock_guard lock(mu_);
    last_write_was_command_ = true;
    pending_.reset();  // a new command abandons one still waiting for its parameter
    reset = handle_command(value);
    refill();
    update_irq();
  }
  if (reset && on_reset_) on_reset_();
}

bool I8042::trigger_ctrl_alt_del() {
  std::lock_guard lock(mu_);
  bool ok = kbd_.type_ctrl_alt_del();
  refill();
  update_irq();
  return ok;
}

I8042::Stats I8042::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

bool I8042::handle_command(uint8_t cmd) {
  if (cmd >= kCmdReadRam && cmd < kCmdReadRam + ram_.size()) {
    reply(ram_[cmd - kCmdReadRam]);
    return false;
  }
  if (cmd >= kCmdWriteRam && cmd < kCmdWriteRam + ram_.size()) {
    pending_ = cmd;
    return false;
  }
  if (cmd >= kCmdPulseOutput) {
    // Bits 3:0 clear = pulse that output line; bit 0 is the CPU reset line.
    if (cmd & kOutputPortReset) return false;
    ++stats_.reset_requests;
    spdlog::info("i8042: guest pulsed the reset line (command {:#04x})", cmd);
    return true;
  }
  switch (cmd) {
    case kCmdAuxDisable:
      ctr() |= kCtrAuxDis;
      break;
    case kCmdAuxEnable:
      ctr() &= ~kCtrAuxDis;
      break;
    case kCmdAuxTest:
      reply(kAuxClockStuckHigh);
      break;
    case kCmdSelfTest:
      ctr() |= kCtrSys;
      reply(kSelfTestOk);
      break;
    case kCmdKbdTest:
      reply(kInterfaceTestOk);
      break;
    case kCmdKbdDisable:
      ctr() |= kCtrKbdDis;
      break;
    case kCmdKbdEnable:
      ctr() &= ~kCtrKbdDis;
      break;
    case kCmdReadInputPort:
      reply(0x80);  // bit 7: keyboard not inhibited
      break;
    case kCmdReadOutputPort:
      reply(output_port_);
      break;
    case kCmdReadTestInputs:
      reply(0x00);
      break;
    case kCmdWriteOutputPort:
    case kCmdWriteKbdOutput:
    case kCmdWriteAuxOutput:
    case kCmdWriteAux:
      pending_ = cmd;
      break;
    default:
      ++stats_.unknown_commands;
      TERN_LOG_RATELIMITED(log_limit_, debug, "i8042: ignored command {:#04x}", cmd);
      break;
  }
  return false;
}

bool I8042::handle_parameter(uint8_t cmd, uint8_t value) {
  if (cmd >= kCmdWriteRam && cmd < kCmdWriteRam + ram_.size()) {
    ram_[cmd - kCmdWriteRam] = value;
    return false;
  }
  switch (cmd) {
    case kCmdWriteOutputPort:
      output_port_ = value;
      if (!(value & kOutputPortReset)) {
        ++stats_.reset_requests;
        spdlog::info("i8042: guest cleared the reset bit of the output port");
        return true;
      }
      break;
    case kCmdWriteKbdOutput:
    case kCmdWriteAuxOutput:  // no AUX port: the byte comes back on the keyboard channel
      reply(value);
      break;
    case kCmdWriteAux:
      ++stats_.aux_bytes_dropped;
      break;
  }
  return false;
}

void I8042::reply(uint8_t byte) {
  if (!replies_.push(byte))
    TERN_LOG_RATELIMITED(log_limit_, debug, "i8042: reply {:#04x} dropped, guest not reading",
                         byte);
}

std::optional<uint8_t> I8042::translate(uint8_t byte) {
  // Set 2 -> set 1 translation (CTR.XLATE) for the codes Ps2Keyboard produces: a 0xF0 prefix
  // becomes bit 7 of the next code. Codes this keyboard never sends pass through unchanged.
  if (byte == 0xF0) {
    xlate_break_ = true;
    return std::nullopt;
  }
  struct Pair {
    uint8_t set2, set1;
  };
  static constexpr Pair kTable[] = {
      {0x01, 0x43},  // scan code set 1 (the F0 00 reply) / F9
      {0x02, 0x41},  // scan code set 2
      {0x03, 0x3F},  // scan code set 3 / F5
      {0x11, 0x38},  // left Alt
      {0x14, 0x1D},  // left Ctrl
      {0x71, 0x53},  // Delete (after E0)
      {0x83, 0x41},  // second ID byte / F7
  };
  uint8_t out = byte;
  for (const Pair& p : kTable) {
    if (p.set2 == byte) out = p.set1;
  }
  if (std::exchange(xlate_break_, false)) out |= 0x80;
  return out;
}

void I8042::refill() {
  while (!obuf_) {
    if (!replies_.empty()) {
      obuf_ = replies_.pop_front();
    } else if (!(ctr() & kCtrKbdDis) && kbd_.has_output()) {
      uint8_t b = kbd_.pop_output();
      obuf_ = (ctr() & kCtrXlate) ? translate(b) : std::optional<uint8_t>(b);
    } else {
      break;
    }
  }
}

void I8042::update_irq() {
  irq_.set(obuf_.has_value() && (ctr() & kCtrKbdInt));
}

}  // namespace tern
