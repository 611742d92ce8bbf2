// The DSDT's AML: hand-assembled bytes (ACPI 6.0 chapter 20, "ACPI Machine Language").
#pragma once

#include <cstdint>
#include <vector>

namespace tern::x86::acpi {

/// AML for `Name(_S5_, Package(){slp_typ, 0, 0, 0})` in the root scope: SLP_TYPa = `slp_typ`
/// (what the guest writes to SLEEP_CONTROL_REG's SLP_TYP field to power off), SLP_TYPb and two
/// reserved elements 0. Integers use ZeroOp / OneOp / BytePrefix as the grammar allows.
[[nodiscard]] std::vector<uint8_t> aml_s5_package(uint8_t slp_typ);

}  // namespace tern::x86::acpi
