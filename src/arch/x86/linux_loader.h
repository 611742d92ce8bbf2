// Loading a bzImage, its command line and initrd into guest memory and filling in boot_params for
// the Linux 64-bit boot protocol (Documentation/x86/boot.rst, "64-bit BOOT PROTOCOL").
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "arch/x86/boot_params.h"
#include "arch/x86/bzimage.h"
#include "arch/x86/e820.h"
#include "arch/x86/linux_placement.h"
#include "base/result.h"
#include "memory/guest_memory.h"

namespace tern::x86 {

/// Offset of the 64-bit entry point from the protected-mode kernel's load address.
inline constexpr uint64_t kEntry64Offset = 0x200;

/// What load_linux wrote where (GPAs and sizes in bytes), for the vCPU setup and the logs.
struct LinuxBoot {
  uint64_t entry_rip = 0;        ///< 64-bit entry: kernel load address + 0x200.
  uint64_t boot_params_gpa = 0;  ///< kZeroPageAddr: goes in RSI.
  KernelFootprint kernel;        ///< Payload at kernel.load_gpa (kHimemStart) and its footprint.
  uint64_t cmdline_gpa = 0;      ///< kCmdlineAddr.
  uint64_t cmdline_len = 0;      ///< Command line length without the NUL.
  uint64_t initrd_gpa = 0;       ///< 0 when there is no initrd.
  uint64_t initrd_size = 0;
  std::vector<E820Entry> e820;  ///< The memory map given to the guest.
};

/// Loads `kernel` for a guest with `ram_bytes` of RAM laid out as layout.h's ram_regions():
/// payload at kHimemStart, `cmdline` (+ NUL) at kCmdlineAddr, `initrd` (may be empty) at
/// place_initrd()'s address, and boot_params at kZeroPageAddr with the setup header, loader fields
/// and build_e820(ram_bytes). Everything is validated before the first write (command line,
/// RAM size, initrd placement, and that `mem` backs every e820 RAM range and every destination),
/// so on error guest memory is untouched. Does not write page tables, GDT, MP or ACPI tables.
[[nodiscard]] Result<LinuxBoot> load_linux(const GuestMemory& mem, uint64_t ram_bytes,
                                           const BzImage& kernel, std::string_view cmdline,
                                           std::span<const uint8_t> initrd);

/// The boot_params load_linux writes (exposed for tests and tools): the kernel's setup header
/// with type_of_loader 0xFF, vid_mode 0xFFFF, loadflags |= CAN_USE_HEAP with heap_end_ptr 0xFE00,
/// code32_start = kernel.load_gpa, cmd_line_ptr, ramdisk_image/size (ext_* = high 32 bits) and
/// the e820 table. The sentinel at 0x1EF stays 0.
[[nodiscard]] BootParams make_boot_params(const BzImage& kernel, const LinuxBoot& boot);

}  // namespace tern::x86
