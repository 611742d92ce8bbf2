// BootInputs: the user's VM description read and validated — files loaded, kernel parsed,
// command line, sizes and placement checked — before KVM or any thread is touched.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "arch/x86/bzimage.h"
#include "base/result.h"
#include "devices/console/console_target.h"
#include "vmm/devices/made_device.h"
#include "config/vm_specs.h"
#include "vmm/vm_config.h"

namespace tern {

/// A VmConfig after validation, with the files it names already read.
struct BootInputs {
  VmConfig config;
  x86::BzImage kernel;
  std::vector<uint8_t> initrd;  ///< Empty when there is no initrd.
  ConsoleTarget console;
  /// One device per config.devices entry, in order, made by the device registry (disk images
  /// already open): virtio devices and PCI function models (NVMe disks).
  std::vector<MadeDevice> devices;
};

/// Reads and validates everything `config` names. Each error names the field it concerns
/// (--kernel, --initrd, --cmdline, --memory, --cpus, --console) and what is wrong with it:
/// unreadable files, a file that is not a 64-bit bzImage (or is truncated), a command line
/// longer than the kernel's cmdline_size, too little RAM for kernel + initrd, more RAM than the
/// host can back, an initrd that cannot be placed under initrd_addr_max, a vCPU count of 0 or
/// beyond what the MP table/APIC IDs allow, a malformed console target, a disk image that is
/// missing, not writable without readonly=on, or on a filesystem without O_DIRECT for cache=none
/// (--disk; see VirtioBlock::create), an rng rate limit the device refuses (--rng).
[[nodiscard]] Result<BootInputs> prepare_boot(const VmConfig& config);

}  // namespace tern
