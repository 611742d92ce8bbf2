// CmosRtc snapshot save/restore.
#include <algorithm>

#include "devices/device_state.h"
#include "devices/legacy/cmos_rtc.h"

namespace tern {

using devstate::bad_field;
using devstate::named;

namespace {
constexpr uint32_t kVersion = 1;
constexpr std::string_view kDev = "cmos-rtc";
constexpr uint8_t kRegB = 0x0B;
constexpr uint8_t kRegBSet = 0x80;
}  // namespace

void CmosRtc::save_state(snap::ByteWriter& w) const {
  std::lock_guard lock(mu_);
  w.u32(kVersion);
  w.u8(index_);
  w.boolean(nmi_masked_);
  w.bytes(ram_);
  w.u64(static_cast<uint64_t>(offset_seconds_));
  w.boolean(frozen_.has_value());
  std::tm t = frozen_.value_or(std::tm{});
  for (int v : {t.tm_sec, t.tm_min, t.tm_hour, t.tm_mday, t.tm_mon, t.tm_year, t.tm_wday})
    w.u32(static_cast<uint32_t>(v));
}

Result<void> CmosRtc::restore_state(snap::ByteReader& r) {
  TRY(devstate::expect_version(r, kDev, kVersion));
  ASSIGN_OR_RETURN(uint8_t index, named(kDev, "index", r.u8()));
  ASSIGN_OR_RETURN(bool nmi_masked, named(kDev, "nmi masked", r.boolean()));
  ASSIGN_OR_RETURN(auto ram_bytes, named(kDev, "cmos ram", r.bytes(128)));
  ASSIGN_OR_RETURN(uint64_t offset_raw, named(kDev, "clock offset", r.u64()));
  ASSIGN_OR_RETURN(bool has_frozen, named(kDev, "frozen time", r.boolean()));
  int32_t f[7];
  for (int32_t& v : f) {
    ASSIGN_OR_RETURN(uint32_t raw, named(kDev, "frozen time", r.u32()));
    v = static_cast<int32_t>(raw);
    if (v > kTmFieldLimit || v < -kTmFieldLimit)
      return bad_field(kDev, "frozen time", "field " + std::to_string(v) + " out of range");
  }
  if (index > 0x7F) return bad_field(kDev, "index", std::to_string(index) + " (0..127)");
  auto offset = static_cast<int64_t>(offset_raw);
  if (offset > kOffsetLimit || offset < -kOffsetLimit)
    return bad_field(kDev, "clock offset", std::to_string(offset) + " s out of range");
  if (has_frozen != ((ram_bytes[kRegB] & kRegBSet) != 0))
    return bad_field(kDev, "frozen time", "present iff register B's SET bit is set");
  // save_state() writes zeros when there is no frozen time: anything else is not a saved state.
  if (!has_frozen && std::any_of(std::begin(f), std::end(f), [](int32_t v) { return v != 0; }))
    return bad_field(kDev, "frozen time", "fields without the presence flag");
  std::lock_guard lock(mu_);
  index_ = index;
  nmi_masked_ = nmi_masked;
  std::copy(ram_bytes.begin(), ram_bytes.end(), ram_.begin());
  offset_seconds_ = offset;
  frozen_.reset();
  if (has_frozen) {
    std::tm t{};
    t.tm_sec = f[0];
    t.tm_min = f[1];
    t.tm_hour = f[2];
    t.tm_mday = f[3];
    t.tm_mon = f[4];
    t.tm_year = f[5];
    t.tm_wday = f[6];
    frozen_ = t;
  }
  return {};
}

}  // namespace tern
