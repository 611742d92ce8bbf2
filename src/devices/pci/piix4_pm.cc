#include "devices/pci/piix4_pm.h"

#include <cstring>
#include <utility>

#include "arch/x86/layout.h"
#include "base/clock.h"
#include "devices/device_state.h"

namespace tern {

using devstate::bad_field;
using devstate::named;

namespace {
constexpr uint32_t kVersion = 1;
constexpr std::string_view kTimer = "pm-timer";
constexpr uint32_t kPmbaIoIndicator = 1;  // PMBA bit 0: I/O space, hardwired 1

// PM I/O block offsets (PIIX4 datasheet §7.2).
constexpr uint64_t kPm1Size = 6;  // PMSTS, PMEN, PMCNTRL: AcpiPm's offsets 0-5
constexpr uint64_t kPmTmr = 8;
constexpr uint64_t kPmTmrSize = 4;
}  // namespace

// ---- PmTimer ----

PmTimer::PmTimer() : PmTimer(monotonic_ns) {}

PmTimer::PmTimer(Clock clock) : clock_(std::move(clock)) {}

uint32_t PmTimer::ticks_now() const {
  // ns * 3579545 / 1e9 in 128 bits: exact, and no overflow for any uint64_t ns.
  const unsigned __int128 ticks =
      static_cast<unsigned __int128>(clock_()) * x86::kAcpiPmTimerHz / 1'000'000'000u;
  return static_cast<uint32_t>(ticks) & kMask;
}

uint32_t PmTimer::read() const {
  return (ticks_now() + offset_.load(std::memory_order_relaxed)) & kMask;
}

void PmTimer::save_state(snap::ByteWriter& w) const {
  w.u32(kVersion);
  w.u32(read());
}

Result<void> PmTimer::restore_state(snap::ByteReader& r) {
  TRY(devstate::expect_version(r, kTimer, kVersion));
  ASSIGN_OR_RETURN(uint32_t value, named(kTimer, "pmtmr", r.u32()));
  if (value & ~kMask) return bad_field(kTimer, "pmtmr", "more than 24 bits");
  offset_.store((value - ticks_now()) & kMask, std::memory_order_relaxed);
  return {};
}

// ---- Piix4Pm ----

Piix4Pm::Piix4Pm()
    : ChipsetFunction(PciIdentity{.vendor_id = kVendorId,
                                  .device_id = kDeviceId,
                                  .subsystem_vendor_id = kQemuSubsystemVendorId,
                                  .subsystem_id = kQemuSubsystemId,
                                  .revision = kRevision,
                                  .class_code = 0x068000,  // bridge, other
                                  .interrupt_pin = 1,      // INTA#
                                  .interrupt_line = 0}) {
  config_.set32(kPmba, kPmbaIoIndicator);
  config_.set_write_mask(kPmba, static_cast<uint8_t>(kPmbaMask));
  config_.set_write_mask(kPmba + 1, static_cast<uint8_t>(kPmbaMask >> 8));
  config_.set32(kDevactb, kDevactbApmcEn);
  config_.set_write_mask(kPmregmisc, kPmiose);
}

void Piix4Pm::publish_locked() {
  base_.store(static_cast<uint16_t>(config_.read32(kPmba) & kPmbaMask), std::memory_order_relaxed);
  enabled_.store((config_.read8(kPmregmisc) & kPmiose) != 0, std::memory_order_relaxed);
}

void Piix4Pm::on_config_write(uint32_t, size_t, const std::array<uint8_t, 4>&) {
  const bool was = enabled_.load(std::memory_order_relaxed);
  const uint16_t was_base = base_.load(std::memory_order_relaxed);
  publish_locked();
  const bool on = enabled_.load(std::memory_order_relaxed);
  const uint16_t base = base_.load(std::memory_order_relaxed);
  // Both bases a firmware boot serves the block at (layout.h): OVMF's 0xB000, SeaBIOS's 0x600.
  const bool served = base == x86::kPiix4PmBase || base == x86::kSeaBiosPmBase;
  if (on && !served && (!was || base != was_base)) {
    foreign_bases_.fetch_add(1);
    TERN_LOG_RATELIMITED(log_limit_, warn,
                         "piix4-pm: guest enabled the PM block at {:#x}; tern serves it only at "
                         "{:#x} and {:#x}",
                         base, x86::kPiix4PmBase, x86::kSeaBiosPmBase);
  }
}

void Piix4Pm::reset() {
  std::lock_guard lock(mu_);
  config_.set16(pci::kCommand, 0);
  config_.set8(pci::kInterruptLine, 0);
  config_.set32(kPmba, kPmbaIoIndicator);
  config_.set8(kPmregmisc, 0);
  publish_locked();
}

// ---- Piix4PmIo ----

Piix4PmIo::Piix4PmIo(std::shared_ptr<Piix4Pm> function, std::shared_ptr<AcpiPm> pm1,
                     std::shared_ptr<PmTimer> timer, uint16_t base)
    : function_(std::move(function)), pm1_(std::move(pm1)), timer_(std::move(timer)), base_(base) {}

bool Piix4PmIo::decoding() {
  if (function_->io_enabled() && function_->pm_base() == base_) return true;
  misplaced_.fetch_add(1, std::memory_order_relaxed);
  TERN_LOG_RATELIMITED(log_limit_, info,
                       "piix4-pm: access to the PM block at {:#x} while PMBA is {:#x} and PMIOSE "
                       "{}; tern decodes it only at {:#x} (dropped)",
                       base_, function_->pm_base(), function_->io_enabled() ? "on" : "off", base_);
  return false;
}

void Piix4PmIo::read(uint64_t offset, std::span<uint8_t> data) {
  std::memset(data.data(), 0xFF, data.size());
  if (!decoding()) return;
  uint32_t tmr = 0;
  bool have_tmr = false;
  for (size_t i = 0; i < data.size(); ++i) {
    const uint64_t at = offset + i;
    if (at < kPm1Size) {
      pm1_->read(at, data.subspan(i, 1));
    } else if (at >= kPmTmr && at < kPmTmr + kPmTmrSize) {
      if (!have_tmr) tmr = timer_->read();  // one sample for the whole access
      have_tmr = true;
      data[i] = static_cast<uint8_t>(tmr >> (8 * (at - kPmTmr)));
    } else {
      data[i] = 0;
    }
  }
}

void Piix4PmIo::write(uint64_t offset, std::span<const uint8_t> data) {
  if (!decoding()) return;
  // PM1 registers byte by byte (AcpiPm acts on SLP_EN when the byte holding it is written);
  // PMTMR is read-only and the rest are not modelled.
  for (size_t i = 0; i < data.size(); ++i) {
    const uint64_t at = offset + i;
    if (at < kPm1Size) pm1_->write(at, data.subspan(i, 1));
  }
}

}  // namespace tern
