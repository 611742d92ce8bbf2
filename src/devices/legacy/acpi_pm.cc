#include "devices/legacy/acpi_pm.h"

#include <utility>

#include "arch/x86/layout.h"

namespace tern {

namespace {
constexpr uint64_t kPm1Sts = 0;
constexpr uint64_t kPm1En = 2;
constexpr uint64_t kPm1Cnt = 4;
constexpr uint64_t kReset = 6;
constexpr uint16_t kWakSts = 1u << 15;
constexpr uint16_t kSciEn = 1u << 0;
constexpr unsigned kSlpTypShift = 10;
constexpr uint16_t kSlpTypMask = 0x7;  // after the shift
constexpr uint16_t kSlpEn = 1u << 13;

static_assert(x86::kAcpiPm1aCntPort == x86::kAcpiPm1aEvtPort + kPm1Cnt &&
                  x86::kAcpiResetPort == x86::kAcpiPm1aEvtPort + kReset &&
                  x86::kAcpiPmPortCount == AcpiPm::kRegisterCount,
              "AcpiPm expects its registers at consecutive ports");

uint8_t byte_of(uint16_t v, uint64_t i) { return static_cast<uint8_t>(v >> (8 * i)); }
uint16_t with_byte(uint16_t v, uint64_t i, uint8_t b) {
  return static_cast<uint16_t>((v & ~(0xFFu << (8 * i))) | (uint16_t{b} << (8 * i)));
}
}  // namespace

AcpiPm::AcpiPm(Callback on_poweroff, Callback on_reset)
    : ByteIoDevice(kRegisterCount),
      on_poweroff_(std::move(on_poweroff)),
      on_reset_(std::move(on_reset)) {}

AcpiPm::Stats AcpiPm::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void AcpiPm::reset() {
  std::lock_guard lock(mu_);
  pm1_en_ = 0;
  pm1_cnt_ = kSciEn;
  wake_status_ = false;
}

uint8_t AcpiPm::read_byte(uint64_t offset) {
  std::lock_guard lock(mu_);
  switch (offset) {
    case kPm1Sts:
    case kPm1Sts + 1:
      return byte_of(wake_status_ ? kWakSts : 0, offset - kPm1Sts);
    case kPm1En:
    case kPm1En + 1:
      return byte_of(pm1_en_, offset - kPm1En);
    case kPm1Cnt:
    case kPm1Cnt + 1:
      return byte_of(static_cast<uint16_t>((pm1_cnt_ & ~kSlpEn) | kSciEn), offset - kPm1Cnt);
    default:
      return 0;  // RESET_REG is write-only
  }
}

void AcpiPm::write_byte(uint64_t offset, uint8_t value) {
  Callback* fire = nullptr;
  {
    std::lock_guard lock(mu_);
    switch (offset) {
      case kPm1Sts:
      case kPm1Sts + 1:
        if (byte_of(kWakSts, offset - kPm1Sts) & value) wake_status_ = false;
        break;
      case kPm1En:
      case kPm1En + 1:
        pm1_en_ = with_byte(pm1_en_, offset - kPm1En, value);
        break;
      case kPm1Cnt:
        pm1_cnt_ = with_byte(pm1_cnt_, 0, value);
        break;
      case kPm1Cnt + 1: {
        pm1_cnt_ = with_byte(pm1_cnt_, 1, value);
        if (!(pm1_cnt_ & kSlpEn)) break;
        unsigned type = (pm1_cnt_ >> kSlpTypShift) & kSlpTypMask;
        pm1_cnt_ &= static_cast<uint16_t>(~kSlpEn);
        if (type == x86::kAcpiS5SleepType) {
          ++stats_.poweroff_requests;
          fire = &on_poweroff_;
        } else {
          ++stats_.unsupported_sleeps;
          wake_status_ = true;
          TERN_LOG_RATELIMITED(log_limit_, info,
                               "acpi: guest requested unsupported sleep type {}; waking at once",
                               type);
        }
        break;
      }
      case kReset:
        if (value == x86::kAcpiResetValue) {
          ++stats_.reset_requests;
          fire = &on_reset_;
        }
        break;
    }
  }
  if (fire != nullptr && *fire) (*fire)();
}

}  // namespace tern
