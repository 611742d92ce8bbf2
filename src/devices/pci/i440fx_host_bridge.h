// I440fxHostBridge: the Intel 82441FX PCI and Memory Controller (PMC) at 00:00.0, as QEMU's
// `-M pc` presents it — the identity SeaBIOS and OVMF look for, PAM and SMRAM registers.
#pragma once

#include <cstdint>
#include <functional>

#include "base/result.h"
#include "devices/pci/chipset_function.h"
#include "snapshot/codec.h"

namespace tern {

/// 82441FX PMC, host bridge 8086:1237 revision 02, class 060000, single function.
///
/// Registers beyond the header (82441FX datasheet §3.2):
/// - PAM0..PAM6 (Programmable Attribute Map, 59h-5Fh), reset 00h. PAM0 bits 5:4 (HIENABLE)
///   govern 0F0000h-0FFFFFh; PAMn (n = 1..6) bits 1:0 (LOENABLE) and 5:4 (HIENABLE) govern the
///   16 KiB segments from 0C0000h upward; per field bit 0 = RE (reads from DRAM), bit 1 = WE
///   (writes to DRAM). Reserved bits read 0 and ignore writes.
/// - SMRAM (System Management RAM Control, 72h), reset 02h: D_OPEN (bit 6), D_CLS (5),
///   D_LCK (4), G_SMRAME (3), C_BASE_SEG (2:0, hardwired 010b = A0000h). Setting D_LCK clears
///   D_OPEN and makes D_LCK, D_OPEN and G_SMRAME read-only until reset; D_CLS stays writable.
///   Storage only: tern has no SMM (the PIIX4 PM function tells SeaBIOS SMM is already set up).
///
/// Shadow memory: tern does NOT switch memory under PAM. 0C0000h-0FFFFFh is always plain RAM,
/// readable and writable whatever PAM says; the firmware boot path preloads the BIOS copy there
/// (QEMU's isa-bios alias), and SeaBIOS, which copies itself from the high flash alias when
/// PAM0 says the F segment is not RAM, works either way. PAM writes are stored and read back,
/// and `on_pam_change(index, value)` is called for every PAM register whose value changed so a
/// later change can switch memslots (read-only ROM vs RAM) without touching this class.
class I440fxHostBridge final : public ChipsetFunction {
 public:
  /// Called with the PAM register index (0..6) and its new value. Runs on the vCPU thread under
  /// the bridge's lock: must not call back into the bridge.
  using PamHook = std::function<void(unsigned index, uint8_t value)>;

  static constexpr uint16_t kVendorId = 0x8086;
  static constexpr uint16_t kDeviceId = 0x1237;
  static constexpr uint8_t kRevision = 0x02;
  static constexpr uint32_t kPam0 = 0x59;
  static constexpr unsigned kPamCount = 7;
  static constexpr uint32_t kSmram = 0x72;
  static constexpr uint8_t kSmramReset = 0x02;
  static constexpr uint8_t kSmramDOpen = 1u << 6;
  static constexpr uint8_t kSmramDCls = 1u << 5;
  static constexpr uint8_t kSmramDLck = 1u << 4;
  static constexpr uint8_t kSmramGSmrame = 1u << 3;

  explicit I440fxHostBridge(PamHook on_pam_change = {});

  [[nodiscard]] std::string_view name() const override { return "i440fx"; }
  /// PAM register `index` (0..6).
  [[nodiscard]] uint8_t pam(unsigned index) const;
  [[nodiscard]] uint8_t smram() const;

  /// Power-on values (PAM 00h, SMRAM 02h, command 0); calls on_pam_change for PAMs that change.
  void reset();
  // Snapshot: ChipsetFunction::save_state/restore_state (an SMRAM value D_LCK could not reach
  // is refused; restore calls on_pam_change for every PAM register).

 protected:
  void on_config_write(uint32_t offset, size_t len, const std::array<uint8_t, 4>& old) override;
  Result<void> check_restored_locked() override;
  void after_restore_locked() override;

 private:
  PamHook on_pam_change_;
};

}  // namespace tern
