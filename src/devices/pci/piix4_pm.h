// Piix4Pm: the PIIX4 power-management function (00:01.3) — PMBA/PMREGMISC in configuration
// space, and the PM I/O block it decodes (PM1a event/control registers and the ACPI PM timer).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>

#include "base/log.h"
#include "base/result.h"
#include "bus/bus_device.h"
#include "devices/legacy/acpi_pm.h"
#include "devices/pci/chipset_function.h"
#include "snapshot/codec.h"

namespace tern {

/// The ACPI PM timer (ACPI 6.x §4.8.3.3, PIIX4 PMTMR): a free-running 24-bit counter at
/// 3.579545 MHz derived from the host's CLOCK_MONOTONIC; read-only. A snapshot saves the
/// counter value, and a restored timer counts on from it. Thread-safe (reads are lock-free).
class PmTimer {
 public:
  /// Nanoseconds on a monotonic clock; injectable for tests.
  using Clock = std::function<uint64_t()>;
  static constexpr uint32_t kMask = 0xFFFFFF;

  PmTimer();  ///< monotonic_ns()
  explicit PmTimer(Clock clock);
  /// The counter now (24 bits).
  [[nodiscard]] uint32_t read() const;
  /// Snapshot (version 1): the counter value.
  void save_state(snap::ByteWriter& w) const;
  /// Counts on from the saved value. Errors name "pm-timer".
  [[nodiscard]] Result<void> restore_state(snap::ByteReader& r);

 private:
  [[nodiscard]] uint32_t ticks_now() const;
  Clock clock_;
  std::atomic<uint32_t> offset_{0};  // added (mod 2^24) to the clock's tick count
};

/// 82371AB PIIX4 function 3 (power management), 8086:7113 revision 03, class 068000,
/// interrupt pin A (its SCI is IRQ 9; SeaBIOS writes 9 into Interrupt Line).
///
/// Configuration registers (PIIX4 datasheet §7.1):
/// - PMBA (Power Management Base Address, 40h-43h): bits 15:6 the base of the 64-byte PM I/O
///   block; bit 0 (resource type indicator) reads 1. Reset 00000001h.
/// - DEVACTB (Device Activity B, 58h-5Bh): read-only here with APMC_EN (bit 25) set, as QEMU
///   does without SMM: SeaBIOS then takes SMM as already initialised and never raises an SMI
///   (tern has no SMM; it would wait forever on port B3h).
/// - PMREGMISC (Miscellaneous Power Management, 80h): PMIOSE (bit 0) enables the PM I/O block.
///   Reset 00h.
/// Everything else device-specific (SMBus base 90h, DEVRESx, ...) reads 0 and ignores writes,
/// so Linux's i2c-piix4 sees an unconfigured SMBus and leaves it alone.
class Piix4Pm final : public ChipsetFunction {
 public:
  static constexpr uint16_t kVendorId = 0x8086;
  static constexpr uint16_t kDeviceId = 0x7113;
  static constexpr uint8_t kRevision = 0x03;
  static constexpr uint32_t kPmba = 0x40;
  static constexpr uint32_t kDevactb = 0x58;
  static constexpr uint32_t kDevactbApmcEn = 1u << 25;
  static constexpr uint32_t kPmregmisc = 0x80;
  static constexpr uint8_t kPmiose = 1u << 0;
  static constexpr uint16_t kPmbaMask = 0xFFC0;

  Piix4Pm();

  [[nodiscard]] std::string_view name() const override { return "piix4-pm"; }
  /// PMBA's base (bits 15:6) and PMREGMISC.PMIOSE. Lock-free (read by the PM block on every
  /// access).
  [[nodiscard]] uint16_t pm_base() const { return base_.load(std::memory_order_relaxed); }
  [[nodiscard]] bool io_enabled() const { return enabled_.load(std::memory_order_relaxed); }
  /// Guest writes that enabled the PM block at a base other than x86::kPiix4PmBase, where tern
  /// decodes it (logged at a limited rate; the block does not move).
  [[nodiscard]] uint64_t foreign_bases() const { return foreign_bases_.load(); }
  void reset();
  // Snapshot: ChipsetFunction::save_state/restore_state.

 protected:
  void on_config_write(uint32_t offset, size_t len, const std::array<uint8_t, 4>& old) override;
  void after_restore_locked() override { publish_locked(); }

 private:
  void publish_locked();
  std::atomic<uint16_t> base_{0};
  std::atomic<bool> enabled_{false};
  std::atomic<uint64_t> foreign_bases_{0};
  RateLimit log_limit_{5};
};

/// The PIIX4 PM I/O block, claimed at a fixed base (x86::kPiix4PmBase, 64 ports): tern's bus map
/// is fixed once vCPUs run, so the block does not move with PMBA. It answers only while the
/// function's PMIOSE is set and PMBA holds this base; otherwise reads return all-ones and writes
/// are dropped, and a PMBA pointing elsewhere is counted (misplaced_accesses) and logged at a
/// limited rate.
///
/// Layout (PIIX4 datasheet §7.2; the FADT's PM1a_EVT_BLK, PM1a_CNT_BLK, PM_TMR_BLK):
/// +0 PMSTS and +2 PMEN (PM1a_EVT), +4 PMCNTRL (PM1a_CNT) — served by an AcpiPm, so SLP_EN with
/// SLP_TYP 5 powers off and WAK_STS works as in the direct-boot block at 0x600; +8 PMTMR
/// (PmTimer, read-only). Other offsets (GPSTS, GLBCTL, ...) read 0 and ignore writes. No SCI is
/// raised (TMR_STS/TMR_EN are not modelled).
class Piix4PmIo final : public BusDevice {
 public:
  Piix4PmIo(std::shared_ptr<Piix4Pm> function, std::shared_ptr<AcpiPm> pm1,
            std::shared_ptr<PmTimer> timer, uint16_t base);
  [[nodiscard]] std::string_view name() const override { return "piix4-pm-io"; }
  void read(uint64_t offset, std::span<uint8_t> data) override;
  void write(uint64_t offset, std::span<const uint8_t> data) override;
  /// Accesses dropped because PMIOSE was clear or PMBA pointed elsewhere.
  [[nodiscard]] uint64_t misplaced_accesses() const { return misplaced_.load(); }

 private:
  bool decoding();
  std::shared_ptr<Piix4Pm> function_;
  std::shared_ptr<AcpiPm> pm1_;
  std::shared_ptr<PmTimer> timer_;
  uint16_t base_;
  std::atomic<uint64_t> misplaced_{0};
  RateLimit log_limit_{5};
};

}  // namespace tern
