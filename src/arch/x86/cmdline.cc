#include "arch/x86/cmdline.h"

#include <fmt/format.h>

#include "arch/x86/layout.h"

namespace tern::x86 {

Result<void> validate_cmdline(std::string_view cmdline, uint32_t cmdline_size) {
  if (auto nul = cmdline.find('\0'); nul != std::string_view::npos)
    return fail("kernel command line", fmt::format("contains a NUL byte at offset {}", nul));
  if (cmdline.size() > cmdline_size)
    return fail("kernel command line",
                fmt::format("{} bytes is longer than the kernel's cmdline_size of {} bytes",
                            cmdline.size(), cmdline_size));
  if (cmdline.size() >= kCmdlineMaxBytes)
    return fail("kernel command line",
                fmt::format("{} bytes does not fit tern's {}-byte buffer (NUL included)",
                            cmdline.size(), kCmdlineMaxBytes));
  return {};
}

}  // namespace tern::x86
