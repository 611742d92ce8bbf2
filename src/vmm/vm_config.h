// VmConfig: a validated description of the VM to build (from the CLI or, later, the API).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "block/disk_config.h"

namespace tern {

struct VmConfig {
  std::string kernel_path;                ///< bzImage (Linux x86 boot protocol ≥ 2.12, 64-bit).
  std::optional<std::string> initrd_path;
  std::string cmdline;                    ///< Final kernel command line (defaults applied).
  uint64_t memory_bytes = 512ull << 20;   ///< Guest RAM in bytes (multiple of 4 KiB).
  uint32_t vcpus = 1;
  std::string console = "stdio";         ///< "stdio" or "file:PATH".
  std::vector<DiskConfig> disks;          ///< --disk, in order: the first is /dev/vda.
};

/// The command line tern uses when none is given.
inline constexpr const char* kDefaultCmdline = "console=ttyS0 reboot=k panic=1";

/// `cmdline` with "console=ttyS0" appended when it names no console= at all.
std::string with_default_console(const std::string& cmdline);

}  // namespace tern
