#include "devices/pci/pc_chipset.h"

#include <utility>

#include "arch/x86/layout.h"
#include "devices/device_state.h"

namespace tern {

namespace {
constexpr uint32_t kVersion = 1;
constexpr std::string_view kDev = "pc-chipset";
// PIRQA-D → ISA IRQ as both SeaBIOS (pci_irqs) and OVMF (PciHostIrqs) fill Interrupt Line.
constexpr uint8_t kPirqIrqs[4] = {10, 10, 11, 11};
}  // namespace

uint8_t piix_intx_irq(uint8_t slot, uint8_t pin) {
  if (slot == 0 || slot > 31 || pin == 0 || pin > 4) return 0xFF;
  return kPirqIrqs[(slot - 1 + pin - 1) & 3];
}

Result<std::unique_ptr<PcChipset>> attach_pc_chipset(PciRoot& root, Bus& pio,
                                                     PcChipsetHooks hooks) {
  auto c = std::make_unique<PcChipset>();
  c->host_bridge = std::make_shared<I440fxHostBridge>(std::move(hooks.on_pam_change));
  c->isa_bridge = std::make_shared<Piix3IsaBridge>(std::move(hooks.on_pirq_route));
  c->pm = std::make_shared<Piix4Pm>();
  c->elcr = std::make_shared<Elcr>();
  c->reset_control = std::make_shared<ResetControl>(hooks.on_reset);
  // The PM block has no reset register (its offset 6 is not decoded): RC at 0xCF9 is the
  // FADT's RESET_REG on this chipset.
  c->pm1 = std::make_shared<AcpiPm>(std::move(hooks.on_poweroff), nullptr);
  c->pm_timer = hooks.pm_timer_clock ? std::make_shared<PmTimer>(std::move(hooks.pm_timer_clock))
                                     : std::make_shared<PmTimer>();
  c->pm_io = std::make_shared<Piix4PmIo>(c->pm, c->pm1, c->pm_timer, x86::kPiix4PmBase);

  TRY(root.add_function(kPiixSlot, kPiix3Function, c->isa_bridge));
  TRY(root.add_function(kPiixSlot, kPiix4PmFunction, c->pm));
  TRY(pio.insert(c->elcr, x86::kElcrPort, c->elcr->size()));
  TRY(pio.insert(c->pm_io, x86::kPiix4PmBase, x86::kPiix4PmBlockSize));
  root.set_host_bridge(c->host_bridge);
  root.set_reset_control(c->reset_control);
  return c;
}

void PcChipset::reset() {
  host_bridge->reset();
  isa_bridge->reset();
  pm->reset();
  elcr->reset();
  reset_control->reset();
  pm1->reset();
}

void PcChipset::save_state(snap::ByteWriter& w) const {
  w.u32(kVersion);
  host_bridge->save_state(w);
  isa_bridge->save_state(w);
  pm->save_state(w);
  elcr->save_state(w);
  reset_control->save_state(w);
  pm1->save_state(w);
  pm_timer->save_state(w);
}

Result<void> PcChipset::restore_state(snap::ByteReader& r) {
  TRY(devstate::expect_version(r, kDev, kVersion));
  TRY(host_bridge->restore_state(r));
  TRY(isa_bridge->restore_state(r));
  TRY(pm->restore_state(r));
  TRY(elcr->restore_state(r));
  TRY(reset_control->restore_state(r));
  TRY(pm1->restore_state(r));
  TRY(pm_timer->restore_state(r));
  return {};
}

}  // namespace tern
