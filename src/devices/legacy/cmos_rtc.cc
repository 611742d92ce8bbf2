#include "devices/legacy/cmos_rtc.h"

#include <chrono>
#include <utility>

#include "base/log.h"

namespace tern {

namespace {
constexpr uint8_t kSeconds = 0x00;
constexpr uint8_t kMinutes = 0x02;
constexpr uint8_t kHours = 0x04;
constexpr uint8_t kWeekday = 0x06;
constexpr uint8_t kDayOfMonth = 0x07;
constexpr uint8_t kMonth = 0x08;
constexpr uint8_t kYear = 0x09;
constexpr uint8_t kRegA = 0x0A;
constexpr uint8_t kRegB = 0x0B;
constexpr uint8_t kRegC = 0x0C;
constexpr uint8_t kRegD = 0x0D;
constexpr uint8_t kCentury = 0x32;  // IBM PC convention; the FADT's CENTURY field points here

constexpr uint8_t kRegAUip = 0x80;
constexpr uint8_t kRegBSet = 0x80;
constexpr uint8_t kRegBBinary = 0x04;  // DM
constexpr uint8_t kRegB24h = 0x02;
constexpr uint8_t kRegDVrt = 0x80;
constexpr uint8_t kIndexMask = 0x7F;
constexpr uint8_t kNmiMask = 0x80;
constexpr uint8_t kHourPm = 0x80;

int64_t host_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}
}  // namespace

CmosRtc::CmosRtc() : CmosRtc(host_seconds) {}

CmosRtc::CmosRtc(Clock clock) : ByteIoDevice(kPortCount), clock_(std::move(clock)) {
  ram_[kRegA] = 0x26;  // 32.768 kHz time base, 1024 Hz periodic rate
  ram_[kRegB] = kRegB24h;
}

bool CmosRtc::nmi_masked() const {
  std::lock_guard lock(mu_);
  return nmi_masked_;
}

uint8_t CmosRtc::ram(uint8_t index) const {
  std::lock_guard lock(mu_);
  return index < ram_.size() ? ram_[index] : 0xFF;
}

void CmosRtc::set_ram(uint8_t index, uint8_t value) {
  std::lock_guard lock(mu_);
  if (index < ram_.size()) ram_[index] = value;
}

uint8_t CmosRtc::read_byte(uint64_t offset) {
  std::lock_guard lock(mu_);
  if (offset == 0) return 0xFF;  // the index port is write-only
  return read_register(index_);
}

void CmosRtc::write_byte(uint64_t offset, uint8_t value) {
  std::lock_guard lock(mu_);
  if (offset == 0) {
    index_ = value & kIndexMask;
    nmi_masked_ = (value & kNmiMask) != 0;
    return;
  }
  write_register(index_, value);
}

uint8_t CmosRtc::read_register(uint8_t index) {
  switch (index) {
    case kSeconds:
    case kMinutes:
    case kHours:
    case kWeekday:
    case kDayOfMonth:
    case kMonth:
    case kYear:
    case kCentury: {
      std::tm t = frozen_ ? *frozen_ : guest_time();
      switch (index) {
        case kSeconds:
          return encode(t.tm_sec);
        case kMinutes:
          return encode(t.tm_min);
        case kHours:
          return encode_hour(t.tm_hour);
        case kWeekday:
          return encode(t.tm_wday + 1);  // 1 = Sunday
        case kDayOfMonth:
          return encode(t.tm_mday);
        case kMonth:
          return encode(t.tm_mon + 1);
        case kYear:
          return encode((t.tm_year + 1900) % 100);
        default:
          return encode((t.tm_year + 1900) / 100);
      }
    }
    case kRegA:
      return ram_[kRegA] & ~kRegAUip;  // never mid-update
    case kRegC:
      return 0;  // no interrupt flags: RTC interrupts are not implemented
    case kRegD:
      return kRegDVrt;
    default:
      return ram_[index];
  }
}

void CmosRtc::write_register(uint8_t index, uint8_t value) {
  switch (index) {
    case kSeconds:
    case kMinutes:
    case kHours:
    case kWeekday:
    case kDayOfMonth:
    case kMonth:
    case kYear:
    case kCentury: {
      std::tm t = frozen_ ? *frozen_ : guest_time();
      int year = t.tm_year + 1900;
      switch (index) {
        case kSeconds:
          t.tm_sec = decode(value);
          break;
        case kMinutes:
          t.tm_min = decode(value);
          break;
        case kHours:
          t.tm_hour = decode_hour(value);
          break;
        case kWeekday:
          t.tm_wday = decode(value) - 1;
          break;  // derived from the date on commit
        case kDayOfMonth:
          t.tm_mday = decode(value);
          break;
        case kMonth:
          t.tm_mon = decode(value) - 1;
          break;
        case kYear:
          t.tm_year = year / 100 * 100 + decode(value) % 100 - 1900;
          break;
        default:
          t.tm_year = decode(value) * 100 + year % 100 - 1900;
          break;
      }
      if (!in_limits(t)) {
        spdlog::debug("cmos: guest time field out of range; ignored");
        break;
      }
      if (frozen_) {
        *frozen_ = t;
      } else {
        commit_time(t);
      }
      break;
    }
    case kRegA:
      ram_[kRegA] = value & ~kRegAUip;
      break;
    case kRegB: {
      bool was_set = (ram_[kRegB] & kRegBSet) != 0;
      bool set = (value & kRegBSet) != 0;
      if (set && !was_set) frozen_ = guest_time();  // snapshot before the format may change
      ram_[kRegB] = value;
      if (!set && was_set && frozen_) {
        commit_time(*frozen_);
        frozen_.reset();
      }
      break;
    }
    case kRegC:
    case kRegD:
      break;  // read-only
    default:
      ram_[index] = value;
      break;
  }
}

std::tm CmosRtc::guest_time() const {
  std::time_t now = static_cast<std::time_t>(clock_() + offset_seconds_);
  std::tm t{};
  if (::gmtime_r(&now, &t) == nullptr) {
    std::time_t epoch = 0;
    ::gmtime_r(&epoch, &t);
  }
  return t;
}

void CmosRtc::commit_time(std::tm t) {
  // timegm normalises out-of-range fields (a real RTC would just count on from garbage).
  t.tm_isdst = 0;
  std::time_t when = ::timegm(&t);
  if (when == static_cast<std::time_t>(-1)) {
    spdlog::debug("cmos: guest wrote an unrepresentable time; ignored");
    return;
  }
  const int64_t offset = static_cast<int64_t>(when) - clock_();
  if (offset > kOffsetLimit || offset < -kOffsetLimit) {
    spdlog::debug("cmos: guest wrote a time too far from the host's; ignored");
    return;
  }
  offset_seconds_ = offset;
}

bool CmosRtc::in_limits(const std::tm& t) {
  for (int v : {t.tm_sec, t.tm_min, t.tm_hour, t.tm_mday, t.tm_mon, t.tm_year, t.tm_wday})
    if (v > kTmFieldLimit || v < -kTmFieldLimit) return false;
  return true;
}

uint8_t CmosRtc::encode(int value) const {
  auto v = static_cast<uint8_t>(value);
  if (ram_[kRegB] & kRegBBinary) return v;
  return static_cast<uint8_t>(((v / 10) % 10) << 4 | (v % 10));
}

int CmosRtc::decode(uint8_t value) const {
  if (ram_[kRegB] & kRegBBinary) return value;
  return (value >> 4) * 10 + (value & 0x0F);
}

uint8_t CmosRtc::encode_hour(int hour) const {
  if (ram_[kRegB] & kRegB24h) return encode(hour);
  int h12 = hour % 12 == 0 ? 12 : hour % 12;
  return static_cast<uint8_t>(encode(h12) | (hour >= 12 ? kHourPm : 0));
}

int CmosRtc::decode_hour(uint8_t value) const {
  if (ram_[kRegB] & kRegB24h) return decode(value);
  int h = decode(value & ~kHourPm) % 12;
  return (value & kHourPm) ? h + 12 : h;
}

}  // namespace tern
