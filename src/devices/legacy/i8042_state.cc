// I8042 and Ps2Keyboard snapshot save/restore.
#include "devices/device_state.h"
#include "devices/legacy/i8042.h"
#include "devices/legacy/i8042_registers.h"

namespace tern {

using devstate::bad_field;
using devstate::named;

namespace {
constexpr uint32_t kVersion = 1;
constexpr std::string_view kDev = "i8042";
constexpr std::string_view kKbd = "i8042 keyboard";

void put_opt(snap::ByteWriter& w, const std::optional<uint8_t>& v) {
  w.boolean(v.has_value());
  w.u8(v.value_or(0));
}

Result<std::optional<uint8_t>> get_opt(snap::ByteReader& r, std::string_view dev,
                                       std::string_view field) {
  ASSIGN_OR_RETURN(bool has, named(dev, field, r.boolean()));
  ASSIGN_OR_RETURN(uint8_t v, named(dev, field, r.u8()));
  if (!has && v != 0) return bad_field(dev, field, "value without presence flag");
  return has ? std::optional<uint8_t>(v) : std::nullopt;
}
}  // namespace

void Ps2Keyboard::save_state(snap::ByteWriter& w) const {
  w.blob(out_.contents());
  put_opt(w, pending_);
  w.u8(scan_set_);
  w.boolean(scanning_);
  w.u8(leds_);
  w.u8(typematic_);
}

Result<void> Ps2Keyboard::restore_state(snap::ByteReader& r) {
  ASSIGN_OR_RETURN(auto out, named(kKbd, "output buffer", r.blob(out_.capacity())));
  ASSIGN_OR_RETURN(auto pending, get_opt(r, kKbd, "pending command"));
  ASSIGN_OR_RETURN(uint8_t scan_set, named(kKbd, "scan code set", r.u8()));
  ASSIGN_OR_RETURN(bool scanning, named(kKbd, "scanning", r.boolean()));
  ASSIGN_OR_RETURN(uint8_t leds, named(kKbd, "leds", r.u8()));
  ASSIGN_OR_RETURN(uint8_t typematic, named(kKbd, "typematic", r.u8()));
  if (scan_set < 1 || scan_set > 3)
    return bad_field(kKbd, "scan code set", std::to_string(scan_set) + " (1..3)");
  out_.clear();
  out_.push(out);
  pending_ = pending;
  scan_set_ = scan_set;
  scanning_ = scanning;
  leds_ = leds;
  typematic_ = typematic;
  return {};
}

void I8042::save_state(snap::ByteWriter& w) const {
  std::lock_guard lock(mu_);
  w.u32(kVersion);
  w.bytes(ram_);
  w.blob(replies_.contents());
  put_opt(w, obuf_);
  w.u8(last_data_);
  put_opt(w, pending_);
  w.u8(output_port_);
  w.boolean(last_write_was_command_);
  w.boolean(xlate_break_);
  kbd_.save_state(w);
}

Result<void> I8042::restore_state(snap::ByteReader& r) {
  TRY(devstate::expect_version(r, kDev, kVersion));
  std::array<uint8_t, 32> ram;
  ASSIGN_OR_RETURN(auto ram_bytes, named(kDev, "controller ram", r.bytes(ram.size())));
  std::copy(ram_bytes.begin(), ram_bytes.end(), ram.begin());
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(auto replies, named(kDev, "reply queue", r.blob(replies_.capacity())));
  ASSIGN_OR_RETURN(auto obuf, get_opt(r, kDev, "output buffer"));
  ASSIGN_OR_RETURN(uint8_t last_data, named(kDev, "last data", r.u8()));
  ASSIGN_OR_RETURN(auto pending, get_opt(r, kDev, "pending command"));
  ASSIGN_OR_RETURN(uint8_t output_port, named(kDev, "output port", r.u8()));
  ASSIGN_OR_RETURN(bool last_cmd, named(kDev, "last write was command", r.boolean()));
  ASSIGN_OR_RETURN(bool xlate_break, named(kDev, "translation break prefix", r.boolean()));
  if (pending) {
    uint8_t c = *pending;
    bool ram_write = c >= i8042::kCmdWriteRam && c < i8042::kCmdWriteRam + ram_.size();
    bool known = c == i8042::kCmdWriteOutputPort || c == i8042::kCmdWriteKbdOutput ||
                 c == i8042::kCmdWriteAuxOutput || c == i8042::kCmdWriteAux;
    if (!ram_write && !known)
      return bad_field(kDev, "pending command",
                       std::to_string(c) + " is not a command that takes a parameter");
  }
  TRY(kbd_.restore_state(r));
  ram_ = ram;
  replies_.clear();
  replies_.push(replies);
  obuf_ = obuf;
  last_data_ = last_data;
  pending_ = pending;
  output_port_ = output_port;
  last_write_was_command_ = last_cmd;
  xlate_break_ = xlate_break;
  irq_.restore_level(obuf_.has_value() && (ctr() & i8042::kCtrKbdInt));
  return {};
}

}  // namespace tern
