// AcpiPm snapshot save/restore.
#include "devices/device_state.h"
#include "devices/legacy/acpi_pm.h"

namespace tern {

using devstate::bad_field;
using devstate::named;

namespace {
constexpr uint32_t kVersion = 1;
constexpr std::string_view kDev = "acpi-pm";
constexpr uint16_t kSlpEn = 1u << 13;
}  // namespace

void AcpiPm::save_state(snap::ByteWriter& w) const {
  std::lock_guard lock(mu_);
  w.u32(kVersion);
  w.boolean(wake_status_);
  w.u16(pm1_en_);
  w.u16(pm1_cnt_);
}

Result<void> AcpiPm::restore_state(snap::ByteReader& r) {
  TRY(devstate::expect_version(r, kDev, kVersion));
  ASSIGN_OR_RETURN(bool wake, named(kDev, "pm1_sts.wak_sts", r.boolean()));
  ASSIGN_OR_RETURN(uint16_t en, named(kDev, "pm1_en", r.u16()));
  ASSIGN_OR_RETURN(uint16_t cnt, named(kDev, "pm1_cnt", r.u16()));
  if (cnt & kSlpEn) return bad_field(kDev, "pm1_cnt", "SLP_EN set (it is write-only)");
  std::lock_guard lock(mu_);
  wake_status_ = wake;
  pm1_en_ = en;
  pm1_cnt_ = cnt;
  return {};
}

}  // namespace tern
