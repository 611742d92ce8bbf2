// Kernel command line limits (boot.rst: cmd_line_ptr, cmdline_size).
#pragma once

#include <cstdint>
#include <string_view>

#include "base/result.h"

namespace tern::x86 {

/// Checks that `cmdline` can be handed to a kernel whose setup header says `cmdline_size`:
/// its length in bytes (without the terminating NUL tern appends) must be <= cmdline_size and
/// < kCmdlineMaxBytes (the space at kCmdlineAddr, NUL included), and it must contain no NUL byte.
/// Errors (op "kernel command line") give both numbers or the NUL's offset.
[[nodiscard]] Result<void> validate_cmdline(std::string_view cmdline, uint32_t cmdline_size);

}  // namespace tern::x86
