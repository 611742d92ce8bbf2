// Where a bzImage's kernel and initrd go in guest RAM, and whether the guest has room for them
// (boot.rst: "Details of header fields" for kernel_alignment, pref_address, init_size and
// initrd_addr_max; "64-bit BOOT PROTOCOL").
#pragma once

#include <cstdint>

#include "arch/x86/bzimage.h"
#include "base/result.h"

namespace tern::x86 {

/// The guest-physical range the kernel uses before it has set up its own memory map.
struct KernelFootprint {
  uint64_t load_gpa = 0;        ///< Where the payload is copied; 64-bit entry = load_gpa + 0x200.
  uint64_t payload_end = 0;     ///< load_gpa + payload size.
  uint64_t decompress_gpa = 0;  ///< Where the kernel decompresses itself (see kernel_footprint).
  uint64_t end = 0;             ///< max(payload_end, decompress_gpa + init_size): first free byte.
};

/// Footprint of `kernel` loaded at `load_gpa` (bytes, GPA). The decompressor (head_64.S) runs at
/// max(load_gpa aligned up to kernel_alignment, pref_address) for a relocatable kernel and at
/// pref_address otherwise, and needs init_size bytes there. Fails only on address overflow.
[[nodiscard]] Result<KernelFootprint> kernel_footprint(const BzImage& kernel, uint64_t load_gpa);

/// Checks that RAM below the 32-bit hole (min(ram_bytes, kHoleStart)) holds the kernel footprint
/// plus the initrd (`initrd_size` bytes rounded up to 4 KiB). The error (op "guest memory") says
/// how many MiB are needed and how many the guest has.
[[nodiscard]] Result<void> check_low_ram(const KernelFootprint& kernel, uint64_t initrd_size,
                                         uint64_t ram_bytes);

/// GPA for an initrd of `initrd_size` (> 0) bytes: the highest 4 KiB-aligned address such that
/// the initrd ends at or below min(initrd_addr_max + 1, min(ram_bytes, kHoleStart), 4 GiB) and
/// starts at or above `kernel_end` (initrd_addr_max is the highest byte it may occupy, as in the
/// setup header). The error (op "initrd") names the sizes and limits when it cannot be placed.
[[nodiscard]] Result<uint64_t> place_initrd(uint64_t initrd_size, uint64_t kernel_end,
                                            uint32_t initrd_addr_max, uint64_t ram_bytes);

}  // namespace tern::x86
