// The DSDT's AML: hand-assembled bytes (ACPI 6.0 chapter 20, "ACPI Machine Language").
#pragma once

#include <cstdint>
#include <vector>

namespace tern::x86::acpi {

/// AML for `Name(_S5_, Package(){slp_typ, 0, 0, 0})` in the root scope: SLP_TYPa = `slp_typ`
/// (what the guest writes to SLEEP_CONTROL_REG's SLP_TYP field to power off), SLP_TYPb and two
/// reserved elements 0. Integers use ZeroOp / OneOp / BytePrefix as the grammar allows.
[[nodiscard]] std::vector<uint8_t> aml_s5_package(uint8_t slp_typ);

/// AML for the PCI host bridge `Device(\_SB.PCI0)`: _HID PNP0A03, _UID 0, _BBN 0, and a _CRS
/// with bus numbers 0-255, the config mechanism #1 ports 0xCF8-0xCFF, the I/O windows around them
/// and the 32-bit memory window [mmio_start, mmio_end) (guest-physical) that BARs live in. No _PRT:
/// virtio-pci uses MSI-X; a driver falling back to INTx gets the Interrupt Line's ISA IRQ.
[[nodiscard]] std::vector<uint8_t> aml_pci_root(uint32_t mmio_start, uint32_t mmio_end);

}  // namespace tern::x86::acpi
