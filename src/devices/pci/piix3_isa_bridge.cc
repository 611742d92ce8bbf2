#include "devices/pci/piix3_isa_bridge.h"

#include <cstring>
#include <utility>

#include "devices/device_state.h"

namespace tern {

using devstate::bad_field;
using devstate::named;

namespace {
constexpr uint32_t kVersion = 1;
constexpr std::string_view kElcr = "elcr";
constexpr std::string_view kRc = "reset-control";
constexpr uint8_t kIrqMask = 0x0F;
// IRQs PIRQRC may name (PIIX3 datasheet: 0-2, 8, 13 are reserved).
constexpr uint16_t kRoutableIrqs = 0xDEF8;
}  // namespace

// ---- Piix3IsaBridge ----

Piix3IsaBridge::Piix3IsaBridge(PirqHook on_pirq_route)
    : ChipsetFunction(PciIdentity{.vendor_id = kVendorId,
                                  .device_id = kDeviceId,
                                  .subsystem_vendor_id = kQemuSubsystemVendorId,
                                  .subsystem_id = kQemuSubsystemId,
                                  .revision = 0,
                                  .class_code = 0x060100,  // bridge, ISA bridge
                                  .interrupt_pin = 0,
                                  .interrupt_line = 0}),
      on_pirq_route_(std::move(on_pirq_route)) {
  config_.set8(pci::kHeaderType, pci::kHeaderTypeMultiFunction);
  for (unsigned i = 0; i < kPirqCount; ++i) {
    config_.set_write_mask(kPirqrc + i, kPirqWritable);
    config_.set8(kPirqrc + i, kPirqDisabled);
  }
}

std::optional<uint8_t> Piix3IsaBridge::decode_route(uint8_t value) {
  if (value & kPirqDisabled) return std::nullopt;
  const uint8_t irq = value & kIrqMask;
  if (!((kRoutableIrqs >> irq) & 1)) return std::nullopt;
  return irq;
}

uint8_t Piix3IsaBridge::pirq_route_control(unsigned pirq) const {
  std::lock_guard lock(mu_);
  return pirq < kPirqCount ? config_.read8(kPirqrc + pirq) : kPirqDisabled;
}

std::optional<uint8_t> Piix3IsaBridge::pirq_irq(unsigned pirq) const {
  return decode_route(pirq_route_control(pirq));
}

void Piix3IsaBridge::on_config_write(uint32_t offset, size_t len,
                                     const std::array<uint8_t, 4>& old) {
  for (unsigned i = 0; i < kPirqCount; ++i) {
    const uint32_t reg = kPirqrc + i;
    if (!covers(offset, len, reg)) continue;
    const auto now = decode_route(config_.read8(reg));
    if (now != decode_route(old[reg - offset]) && on_pirq_route_) on_pirq_route_(i, now);
  }
}

void Piix3IsaBridge::reset() {
  std::lock_guard lock(mu_);
  config_.set16(pci::kCommand, 0);
  for (unsigned i = 0; i < kPirqCount; ++i) {
    const bool changed = decode_route(config_.read8(kPirqrc + i)).has_value();
    config_.set8(kPirqrc + i, kPirqDisabled);
    if (changed && on_pirq_route_) on_pirq_route_(i, std::nullopt);
  }
}

void Piix3IsaBridge::after_restore_locked() {
  if (on_pirq_route_)
    for (unsigned i = 0; i < kPirqCount; ++i)
      on_pirq_route_(i, decode_route(config_.read8(kPirqrc + i)));
}

// ---- Elcr ----

uint16_t Elcr::value() const {
  std::lock_guard lock(mu_);
  return static_cast<uint16_t>(elcr_[0] | elcr_[1] << 8);
}

void Elcr::reset() {
  std::lock_guard lock(mu_);
  elcr_[0] = elcr_[1] = 0;
}

uint8_t Elcr::read_byte(uint64_t offset) {
  std::lock_guard lock(mu_);
  return elcr_[offset & 1];
}

void Elcr::write_byte(uint64_t offset, uint8_t value) {
  std::lock_guard lock(mu_);
  elcr_[offset & 1] = value & (offset == 0 ? kElcr1Mask : kElcr2Mask);
}

void Elcr::save_state(snap::ByteWriter& w) const {
  std::lock_guard lock(mu_);
  w.u32(kVersion);
  w.u8(elcr_[0]);
  w.u8(elcr_[1]);
}

Result<void> Elcr::restore_state(snap::ByteReader& r) {
  TRY(devstate::expect_version(r, kElcr, kVersion));
  ASSIGN_OR_RETURN(uint8_t e1, named(kElcr, "elcr1", r.u8()));
  ASSIGN_OR_RETURN(uint8_t e2, named(kElcr, "elcr2", r.u8()));
  if (e1 & ~kElcr1Mask) return bad_field(kElcr, "elcr1", "reserved bits (IRQ 0-2) set");
  if (e2 & ~kElcr2Mask) return bad_field(kElcr, "elcr2", "reserved bits (IRQ 8, 13) set");
  std::lock_guard lock(mu_);
  elcr_[0] = e1;
  elcr_[1] = e2;
  return {};
}

// ---- ResetControl ----

void ResetControl::read(uint64_t offset, std::span<uint8_t> data) {
  std::memset(data.data(), 0xFF, data.size());
  if (offset == 0 && data.size() == 1) data[0] = value_.load();
}

void ResetControl::write(uint64_t offset, std::span<const uint8_t> data) {
  if (offset != 0 || data.size() != 1) return;
  value_.store(data[0] & kSrst);
  if (!(data[0] & kRcpu)) return;
  requests_.fetch_add(1);
  if (on_reset_) on_reset_();
}

void ResetControl::save_state(snap::ByteWriter& w) const {
  w.u32(kVersion);
  w.u8(value_.load());
}

Result<void> ResetControl::restore_state(snap::ByteReader& r) {
  TRY(devstate::expect_version(r, kRc, kVersion));
  ASSIGN_OR_RETURN(uint8_t v, named(kRc, "rc", r.u8()));
  if (v & ~kSrst) return bad_field(kRc, "rc", "bits other than SRST set");
  value_.store(v);
  return {};
}

}  // namespace tern
