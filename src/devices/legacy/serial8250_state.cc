// Serial8250 snapshot save/restore.
#include "devices/device_state.h"
#include "devices/legacy/serial8250.h"

namespace tern {

using namespace uart;
using devstate::bad_field;
using devstate::named;

namespace {
constexpr uint32_t kVersion = 1;
constexpr std::string_view kDev = "serial0";

std::string hex(unsigned v) {
  char b[16];
  std::snprintf(b, sizeof b, "%#04x", v);
  return b;
}
}  // namespace

void Serial8250::save_state(snap::ByteWriter& w) const {
  std::lock_guard lock(mu_);
  w.u32(kVersion);
  w.u8(rbr_);
  w.u8(ier_);
  w.u8(fcr_);
  w.u8(lcr_);
  w.u8(mcr_);
  w.u8(lsr_errors_);
  w.u8(msr_delta_);
  w.u8(scr_);
  w.u8(dll_);
  w.u8(dlm_);
  w.boolean(thre_pending_);
  w.blob(rx_.contents());
}

Result<void> Serial8250::restore_state(snap::ByteReader& r) {
  TRY(devstate::expect_version(r, kDev, kVersion));
  ASSIGN_OR_RETURN(uint8_t rbr, named(kDev, "rbr", r.u8()));
  ASSIGN_OR_RETURN(uint8_t ier, named(kDev, "ier", r.u8()));
  ASSIGN_OR_RETURN(uint8_t fcr, named(kDev, "fcr", r.u8()));
  ASSIGN_OR_RETURN(uint8_t lcr, named(kDev, "lcr", r.u8()));
  ASSIGN_OR_RETURN(uint8_t mcr, named(kDev, "mcr", r.u8()));
  ASSIGN_OR_RETURN(uint8_t lsr_errors, named(kDev, "lsr errors", r.u8()));
  ASSIGN_OR_RETURN(uint8_t msr_delta, named(kDev, "msr delta", r.u8()));
  ASSIGN_OR_RETURN(uint8_t scr, named(kDev, "scr", r.u8()));
  ASSIGN_OR_RETURN(uint8_t dll, named(kDev, "dll", r.u8()));
  ASSIGN_OR_RETURN(uint8_t dlm, named(kDev, "dlm", r.u8()));
  ASSIGN_OR_RETURN(bool thre_pending, named(kDev, "thre pending", r.boolean()));
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(auto fifo, named(kDev, "receive fifo", r.blob(rx_.capacity())));
  if (ier & ~kIerMask) return bad_field(kDev, "ier", hex(ier) + " has reserved bits set");
  if (fcr & ~kFcrStoredMask || (fcr != 0 && !(fcr & kFcrEnableFifo)))
    return bad_field(kDev, "fcr", hex(fcr) + " is not a stored FCR value");
  if (mcr & ~kMcrMask) return bad_field(kDev, "mcr", hex(mcr) + " has reserved bits set");
  if (lsr_errors & ~kLsrErrorBits)
    return bad_field(kDev, "lsr errors", hex(lsr_errors) + " has non-error bits set");
  if (msr_delta & ~kMsrDeltaMask)
    return bad_field(kDev, "msr delta", hex(msr_delta) + " has non-delta bits set");
  rbr_ = rbr;
  ier_ = ier;
  fcr_ = fcr;
  lcr_ = lcr;
  mcr_ = mcr;
  lsr_errors_ = lsr_errors;
  msr_delta_ = msr_delta;
  scr_ = scr;
  dll_ = dll;
  dlm_ = dlm;
  thre_pending_ = thre_pending;
  rx_.clear();
  rx_.push(fifo);
  irq_.restore_level((iir() & kIirNoInt) == 0);
  return {};
}

}  // namespace tern
