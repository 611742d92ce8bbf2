#include "arch/x86/linux_placement.h"

#include <fmt/format.h>

#include <algorithm>

#include "arch/x86/layout.h"
#include "base/checked.h"

namespace tern::x86 {

namespace {

constexpr uint64_t kPage = 4096;

/// Bytes as MiB, rounded up, for messages.
uint64_t mib_ceil(uint64_t bytes) {
  return bytes / MiB + (bytes % MiB != 0 ? 1 : 0);
}

}  // namespace

Result<KernelFootprint> kernel_footprint(const BzImage& kernel, uint64_t load_gpa) {
  KernelFootprint f;
  f.load_gpa = load_gpa;
  auto payload_end = checked_add(load_gpa, kernel.payload.size());
  if (!payload_end) return fail("kernel placement", "payload end overflows");
  f.payload_end = *payload_end;
  f.decompress_gpa = kernel.pref_address;
  if (kernel.relocatable_kernel) {
    auto aligned = align_up(load_gpa, kernel.kernel_alignment);
    if (!aligned) return fail("kernel placement", "aligned load address overflows");
    f.decompress_gpa = std::max(*aligned, kernel.pref_address);
  }
  auto decompress_end = checked_add(f.decompress_gpa, kernel.init_size);
  if (!decompress_end) return fail("kernel placement", "pref_address + init_size overflows");
  f.end = std::max(f.payload_end, *decompress_end);
  return f;
}

Result<void> check_low_ram(const KernelFootprint& kernel, uint64_t initrd_size,
                           uint64_t ram_bytes) {
  const uint64_t low_ram = std::min(ram_bytes, kHoleStart);
  auto initrd_pages = align_up(initrd_size, kPage);
  auto needed = initrd_pages ? checked_add(kernel.end, *initrd_pages) : std::nullopt;
  if (!needed) return fail("guest memory", "initrd size overflows");
  if (*needed <= low_ram) return {};
  std::string what = fmt::format(
      "{} MiB of guest RAM is too small: the kernel needs RAM up to {:#x} ({} MiB; "
      "decompressed at {:#x} with init_size {:#x})",
      ram_bytes / MiB, kernel.end, mib_ceil(kernel.end), kernel.decompress_gpa,
      kernel.end - kernel.decompress_gpa);
  if (initrd_size > 0) what += fmt::format(" plus {} MiB for the initrd", mib_ceil(*initrd_pages));
  what += fmt::format(": at least {} MiB below 3 GiB", mib_ceil(*needed));
  return fail("guest memory", what);
}

Result<uint64_t> place_initrd(uint64_t initrd_size, uint64_t kernel_end, uint32_t initrd_addr_max,
                              uint64_t ram_bytes) {
  if (initrd_size == 0) return fail("initrd", "is empty");
  const uint64_t limit =
      std::min({uint64_t{initrd_addr_max} + 1, std::min(ram_bytes, kHoleStart), kHoleEnd});
  if (initrd_size <= limit) {
    uint64_t addr = align_down(limit - initrd_size, kPage);
    if (addr >= kernel_end) return addr;
  }
  return fail("initrd",
              fmt::format("{} bytes ({} MiB) do not fit between the kernel's end at {:#x} and "
                          "{:#x} (min of initrd_addr_max {:#x} + 1, RAM below 3 GiB {:#x}, 4 GiB)",
                          initrd_size, mib_ceil(initrd_size), kernel_end, limit, initrd_addr_max,
                          std::min(ram_bytes, kHoleStart)));
}

}  // namespace tern::x86
