// A stand-in for the BIOS at the real-mode reset vector (F000:FFF0).
//
// Linux on a hardware-reduced ACPI platform picks EFI reboot (arch/x86/kernel/reboot.c
// reboot_init(): efi_reboot_required() is true whenever HW_REDUCED_ACPI is set, and the
// efi_runtime_disabled() check does not notice that there is no EFI at all). Without EFI that
// falls through to BOOT_BIOS: machine_real_restart() drops to real mode and jumps to F000:FFF0.
// With nothing there the guest would spin in zeroed memory forever unless "reboot=k" or
// "reboot=a" is on its command line; this stub turns the jump into an ACPI reset request.
#pragma once

#include <array>
#include <cstdint>

#include "base/result.h"
#include "memory/guest_memory.h"

namespace tern::x86 {

/// The stub's real-mode code: `mov al, kAcpiResetValue; mov dx, kAcpiResetPort; out dx, al;`
/// then `hlt; jmp $-3` in case the VMM ignores the write.
[[nodiscard]] std::array<uint8_t, 9> reset_vector_stub();

/// Writes reset_vector_stub() at kResetVectorAddr (inside the e820-reserved BIOS area).
/// Fails only if `mem` does not back that address.
[[nodiscard]] Result<void> write_reset_vector_stub(const GuestMemory& mem);

}  // namespace tern::x86
