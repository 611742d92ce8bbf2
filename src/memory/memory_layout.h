// Internal to src/memory: the checks and the 2 MiB-aligned reservation every GuestMemory
// constructor shares, so all backends lay regions out the same way (host address and fd_offset).
#pragma once

#include <cstdint>
#include <span>

#include "base/result.h"
#include "memory/guest_memory.h"

namespace tern::memory_detail {

/// Checks `specs` (page-aligned, non-zero, no overflow, no overlap); returns the total size.
[[nodiscard]] Result<uint64_t> validate_specs(std::span<const RegionSpec> specs);

/// Maps `total` bytes of private anonymous memory with `prot` at a 2 MiB-aligned address.
[[nodiscard]] Result<uint8_t*> map_aligned(uint64_t total, int prot);

/// Checks that `fd` is a regular file covering every region (file offset = gpa): a page past
/// its end would SIGBUS on first touch. Errors name the sizes.
[[nodiscard]] Result<void> check_memory_file(std::span<const RegionSpec> specs, BorrowedFd fd);

/// "[0x100000000, +0x40000000)" for error messages.
[[nodiscard]] std::string range_text(uint64_t gpa, uint64_t size);

}  // namespace tern::memory_detail
