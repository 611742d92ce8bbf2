// PcChipset: the i440FX + PIIX3 + PIIX4 PM chipset of firmware boots (QEMU's `-M pc`), put on a
// PciRoot and the PIO bus by one factory. Direct kernel boots do not use it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "base/result.h"
#include "bus/bus.h"
#include "devices/legacy/acpi_pm.h"
#include "devices/pci/i440fx_host_bridge.h"
#include "devices/pci/pci_root.h"
#include "devices/pci/piix3_isa_bridge.h"
#include "devices/pci/piix4_pm.h"
#include "snapshot/codec.h"

namespace tern {

/// What the chipset calls back into the VMM for. All may be empty (tests).
struct PcChipsetHooks {
  /// RC (0xCF9) with RCPU set: the same reset the ACPI RESET_REG requests.
  std::function<void()> on_reset;
  /// PMCNTRL SLP_EN with SLP_TYP = S5 in the PIIX4 PM block.
  std::function<void()> on_poweroff;
  /// A PAM register changed (see I440fxHostBridge).
  I440fxHostBridge::PamHook on_pam_change;
  /// A PIRQ route changed (see Piix3IsaBridge).
  Piix3IsaBridge::PirqHook on_pirq_route;
  /// Clock of the PM timer (ns, monotonic); empty: the host's CLOCK_MONOTONIC.
  PmTimer::Clock pm_timer_clock;
};

/// The chipset's devices. Owned by the VMM for the VM's lifetime (the root and the bus hold
/// references too).
///
/// Slots: 00:00.0 i440FX (replacing PciRoot's default host bridge), 00:01.0 PIIX3, 00:01.3 PIIX4
/// PM; PciRoot::add() then places devices from slot 2. PIO: RC at 0xCF9 (through PciRoot's
/// config port), ELCR at 0x4D0-0x4D1, the PM block at x86::kPiix4PmBase (64 ports).
///
/// PCI INTx for firmware boots — what the firmware programs and what tern must wire to match:
/// SeaBIOS and OVMF both write into each device's Interrupt Line the IRQ
/// {10, 10, 11, 11}[(slot - 1 + pin - 1) & 3] (PIIX's swizzle onto PIRQA-D), and a Linux guest
/// whose ACPI tables have no _PRT takes that Interrupt Line ("PCI INT A: no GSI - using ISA IRQ
/// 10") and programs the IOAPIC pin level-triggered. OVMF programs PIRQRC A,B = 11 and C,D = 10,
/// which disagrees with its own Interrupt Line values (on QEMU the _PRT's link devices hide
/// that), so tern wires INTx by piix_intx_irq() at placement, not by PIRQRC: then the line the
/// device drives is the line the guest listens on with either firmware. Devices sharing an IRQ
/// must be combined (wired-OR, IntxRouter) because the guest runs the line level-triggered.
/// virtio and NVMe drivers in Linux use MSI-X, which needs none of this.
class PcChipset {
 public:
  std::shared_ptr<I440fxHostBridge> host_bridge;
  std::shared_ptr<Piix3IsaBridge> isa_bridge;
  std::shared_ptr<Piix4Pm> pm;
  std::shared_ptr<Elcr> elcr;
  std::shared_ptr<ResetControl> reset_control;
  std::shared_ptr<AcpiPm> pm1;  ///< PM1a event/control registers of the PM block.
  std::shared_ptr<PmTimer> pm_timer;
  std::shared_ptr<Piix4PmIo> pm_io;

  /// Power-on values of every register (reboot in place). PM timer keeps counting.
  void reset();
  /// Snapshot (version 1): host bridge, PIIX3, PIIX4 PM configuration spaces, ELCR, RC, PM1
  /// registers, PM timer.
  void save_state(snap::ByteWriter& w) const;
  /// Restores save_state()'s bytes into a chipset attached the same way. Errors name the device
  /// and the field ("pc-chipset" for the version).
  [[nodiscard]] Result<void> restore_state(snap::ByteReader& r);
};

/// Builds the chipset, puts its functions on `root` (before any other device is added, before
/// vCPUs run) and claims its ports on `pio`. Errors: the root's slot 1 or the ports are taken.
[[nodiscard]] Result<std::unique_ptr<PcChipset>> attach_pc_chipset(PciRoot& root, Bus& pio,
                                                                   PcChipsetHooks hooks);

/// PCI slot/function numbers of the chipset's functions.
inline constexpr uint8_t kPiixSlot = 1;
inline constexpr uint8_t kPiix3Function = 0;
inline constexpr uint8_t kPiix4PmFunction = 3;

/// The ISA IRQ firmware assigns to INTx `pin` (1 = INTA# .. 4 = INTD#) of a device in bus-0
/// `slot` (1..31) on this chipset: {10, 10, 11, 11}[(slot - 1 + pin - 1) & 3] (SeaBIOS
/// pciinit.c piix_pci_slot_get_irq; OVMF BdsPlatform.c SetPciIntLine). 0xFF for pin 0 / slot 0.
[[nodiscard]] uint8_t piix_intx_irq(uint8_t slot, uint8_t pin);

}  // namespace tern
