// AcpiPm: the ACPI fixed-hardware PM1a event/control registers and the reset register.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string_view>

#include "base/log.h"
#include "base/result.h"
#include "devices/legacy/byte_io_device.h"
#include "snapshot/codec.h"

namespace tern {

/// The FADT's PM1a_EVT_BLK, PM1a_CNT_BLK and RESET_REG as consecutive ports starting at
/// x86::kAcpiPm1aEvtPort (insert with length kRegisterCount). ACPI 6.x §4.8.3:
///
/// - PM1_STS (offsets 0–1): WAK_STS (bit 15), write 1 to clear. Nothing else ever sets a bit.
/// - PM1_EN (offsets 2–3): read/write storage; no event is ever raised (no SCI yet).
/// - PM1_CNT (offsets 4–5): SCI_EN (bit 0) reads 1 (the platform is always in ACPI mode, so the
///   FADT's SMI_CMD is 0); SLP_TYP (bits 12:10) and SLP_EN (bit 13, write-only): SLP_EN with
///   SLP_TYP == x86::kAcpiS5SleepType calls on_poweroff. Other sleep types are not supported:
///   the request is logged and the system "wakes" at once (WAK_STS set) so the guest's wait
///   loop ends.
/// - RESET_REG (offset 6): writing x86::kAcpiResetValue calls on_reset; reads 0.
///
/// Accesses of any width are split into bytes (ByteIoDevice); the sleep request is acted on when
/// the byte holding SLP_EN (offset 5) is written, which is the last byte of a 16-bit write.
/// Thread-safe; callbacks run on the vCPU thread without the device lock held.
class AcpiPm final : public ByteIoDevice {
 public:
  using Callback = std::function<void()>;
  static constexpr uint64_t kRegisterCount = 7;

  struct Stats {
    uint64_t poweroff_requests = 0;
    uint64_t reset_requests = 0;
    uint64_t unsupported_sleeps = 0;
  };

  AcpiPm(Callback on_poweroff, Callback on_reset);

  [[nodiscard]] std::string_view name() const override { return "acpi-pm"; }
  [[nodiscard]] Stats stats() const;

  /// Power-on values: PM1_STS 0, PM1_EN 0, PM1_CNT SCI_EN (reboot in place).
  void reset();

  /// Snapshot: PM1_STS (WAK_STS), PM1_EN, PM1_CNT. Version 1.
  void save_state(snap::ByteWriter& w) const;
  /// Restores what save_state() wrote (PM1_CNT with SLP_EN set is refused); errors name
  /// "acpi-pm" and the field.
  [[nodiscard]] Result<void> restore_state(snap::ByteReader& r);

 protected:
  uint8_t read_byte(uint64_t offset) override;
  void write_byte(uint64_t offset, uint8_t value) override;

 private:
  Callback on_poweroff_;
  Callback on_reset_;
  mutable std::mutex mu_;
  uint16_t pm1_en_ = 0;
  uint16_t pm1_cnt_ = 1;  // SCI_EN
  bool wake_status_ = false;
  Stats stats_;
  RateLimit log_limit_{5};
};

}  // namespace tern
