#include "devices/pci/i440fx_host_bridge.h"

#include <utility>

#include "devices/device_state.h"

namespace tern {

namespace {
constexpr std::string_view kDev = "i440fx";
constexpr uint8_t kPam0Mask = 0x30;       // HIENABLE only: PAM0's low nibble is reserved
constexpr uint8_t kPamMask = 0x33;        // LOENABLE and HIENABLE
constexpr uint8_t kSmramWritable = 0x78;  // D_OPEN, D_CLS, D_LCK, G_SMRAME

/// The SMRAM value a write of `wanted` (already through the write mask) leaves when the register
/// held `old`: D_LCK set makes D_OPEN 0 and freezes D_LCK, D_OPEN and G_SMRAME.
uint8_t smram_after(uint8_t old, uint8_t wanted) {
  using B = I440fxHostBridge;
  if (old & B::kSmramDLck) {
    const uint8_t frozen = B::kSmramDOpen | B::kSmramDLck | B::kSmramGSmrame;
    return static_cast<uint8_t>((old & frozen) | (wanted & ~frozen));
  }
  if (wanted & B::kSmramDLck) wanted &= static_cast<uint8_t>(~B::kSmramDOpen);
  return wanted;
}
}  // namespace

I440fxHostBridge::I440fxHostBridge(PamHook on_pam_change)
    : ChipsetFunction(PciIdentity{.vendor_id = kVendorId,
                                  .device_id = kDeviceId,
                                  .subsystem_vendor_id = kQemuSubsystemVendorId,
                                  .subsystem_id = kQemuSubsystemId,
                                  .revision = kRevision,
                                  .class_code = 0x060000,  // bridge, host bridge
                                  .interrupt_pin = 0,
                                  .interrupt_line = 0}),
      on_pam_change_(std::move(on_pam_change)) {
  config_.set_write_mask(kPam0, kPam0Mask);
  for (unsigned i = 1; i < kPamCount; ++i) config_.set_write_mask(kPam0 + i, kPamMask);
  config_.set_write_mask(kSmram, kSmramWritable);
  config_.set8(kSmram, kSmramReset);
}

uint8_t I440fxHostBridge::pam(unsigned index) const {
  std::lock_guard lock(mu_);
  return index < kPamCount ? config_.read8(kPam0 + index) : 0;
}

uint8_t I440fxHostBridge::smram() const {
  std::lock_guard lock(mu_);
  return config_.read8(kSmram);
}

void I440fxHostBridge::on_config_write(uint32_t offset, size_t len,
                                       const std::array<uint8_t, 4>& old) {
  if (covers(offset, len, kSmram)) {
    const uint8_t before = old[kSmram - offset];
    config_.set8(kSmram, smram_after(before, config_.read8(kSmram)));
  }
  for (unsigned i = 0; i < kPamCount; ++i) {
    const uint32_t reg = kPam0 + i;
    if (!covers(offset, len, reg)) continue;
    const uint8_t now = config_.read8(reg);
    if (now != old[reg - offset] && on_pam_change_) on_pam_change_(i, now);
  }
}

void I440fxHostBridge::reset() {
  std::lock_guard lock(mu_);
  config_.set16(pci::kCommand, 0);
  config_.set8(kSmram, kSmramReset);
  for (unsigned i = 0; i < kPamCount; ++i) {
    const bool changed = config_.read8(kPam0 + i) != 0;
    config_.set8(kPam0 + i, 0);
    if (changed && on_pam_change_) on_pam_change_(i, 0);
  }
}

Result<void> I440fxHostBridge::check_restored_locked() {
  const uint8_t smram = config_.read8(kSmram);
  if ((smram & kSmramDLck) && (smram & kSmramDOpen))
    return devstate::bad_field(kDev, "smram", "D_OPEN and D_LCK both set");
  return {};
}

void I440fxHostBridge::after_restore_locked() {
  if (on_pam_change_)
    for (unsigned i = 0; i < kPamCount; ++i) on_pam_change_(i, config_.read8(kPam0 + i));
}

}  // namespace tern
