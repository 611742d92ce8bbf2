// CmosRtc: the MC146818-style real-time clock and CMOS RAM at ports 0x70 (index) / 0x71 (data).
#pragma once

#include <array>
#include <cstdint>
#include <ctime>
#include <functional>
#include <mutex>
#include <optional>
#include <string_view>

#include "base/result.h"
#include "devices/legacy/byte_io_device.h"
#include "snapshot/codec.h"

namespace tern {

/// The PC RTC: time and date from the host clock (UTC) plus a guest-set offset, and 128 bytes
/// of CMOS RAM. Insert at x86::kCmosPort with length kPortCount.
///
/// - Port 0x70 (write-only; reads 0xFF): bits 6:0 select the register, bit 7 masks NMI (kept,
///   see nmi_masked(); the VMM does not act on it).
/// - Time registers (0x00 s, 0x02 min, 0x04 h, 0x06 weekday, 0x07 day, 0x08 month, 0x09 year,
///   0x32 century) are computed on every read, BCD or binary per register B's DM bit, 24h or
///   12h (bit 7 = PM) per its 24/12 bit. Defaults as a PC BIOS leaves them: register A = 0x26,
///   register B = 0x02 (24h, BCD; x86 Linux always decodes BCD). UIP always reads 0; a reader
///   that checks the seconds did not change around its reads (mc146818_get_time does) gets a
///   consistent time.
/// - Setting register B's SET bit freezes the time registers for the guest to write; clearing
///   it makes the written time current (stored as an offset from the host clock). A time
///   register written without SET takes effect at once.
/// - Register C (interrupt flags) reads 0: periodic, alarm and update interrupts (IRQ 8) are
///   not implemented. Register D reads 0x80 (VRT: RAM and time valid).
/// - Alarm registers and the rest of the 128 bytes are plain RAM.
/// Thread-safe.
class CmosRtc final : public ByteIoDevice {
 public:
  /// Seconds since the Unix epoch (UTC); injectable for tests.
  using Clock = std::function<int64_t()>;
  static constexpr uint64_t kPortCount = 2;

  /// Uses the host's real-time clock.
  CmosRtc();
  explicit CmosRtc(Clock clock);

  [[nodiscard]] std::string_view name() const override { return "cmos-rtc"; }
  [[nodiscard]] bool nmi_masked() const;

  /// CMOS RAM byte `index` (0..127) as stored (time registers are not computed here).
  [[nodiscard]] uint8_t ram(uint8_t index) const;
  /// Stores `value` at CMOS RAM byte `index` (0..127) without the register semantics of a guest
  /// write (the VMM's initialisation of BIOS bytes; see cmos_memory.h). Indices past 127 are
  /// ignored.
  void set_ram(uint8_t index, uint8_t value);

  /// Snapshot: index register and NMI mask, the 128 bytes of CMOS RAM, the guest's offset from
  /// the host clock (seconds) and the frozen time while register B's SET bit is on. The clock
  /// itself is the host's: a restored guest sees the current time plus its own offset. Version 1.
  void save_state(snap::ByteWriter& w) const;
  /// Restores what save_state() wrote; errors name "cmos-rtc" and the field.
  [[nodiscard]] Result<void> restore_state(snap::ByteReader& r);

 protected:
  uint8_t read_byte(uint64_t offset) override;
  void write_byte(uint64_t offset, uint8_t value) override;

 private:
  uint8_t read_register(uint8_t index);
  void write_register(uint8_t index, uint8_t value);
  std::tm guest_time() const;
  void commit_time(std::tm t);
  uint8_t encode(int value) const;
  int decode(uint8_t value) const;
  uint8_t encode_hour(int hour) const;
  int decode_hour(uint8_t value) const;

  // Bounds every state keeps, so that it saves and restores again: snapshot input outside
  // them is refused, guest writes that would leave them are ignored. Time fields: far beyond
  // what BCD/binary register values give (larger ones could overflow timegm's arithmetic).
  // Offset: ±10^5 years (the registers reach year 16599), so a time frozen from it (register
  // B's SET bit) has its fields inside kTmFieldLimit.
  static constexpr int32_t kTmFieldLimit = 1'000'000;
  static constexpr int64_t kOffsetLimit = int64_t{100'000} * 366 * 86400;
  static bool in_limits(const std::tm& t);

  Clock clock_;
  mutable std::mutex mu_;
  std::array<uint8_t, 128> ram_{};
  uint8_t index_ = 0;
  bool nmi_masked_ = false;
  int64_t offset_seconds_ = 0;     // guest time minus host time
  std::optional<std::tm> frozen_;  // the time registers while register B's SET bit is on
};

}  // namespace tern
