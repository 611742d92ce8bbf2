// VmConfig: the VM to build, derived from the one configuration (VmResources::vm_config(),
// src/vmm/vm_resources.h) when the VM is built: final command line, devices in PCI slot order.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "config/vm_specs.h"
#include "memory/memory_backend.h"
#include "vmm/devices/device_kinds.h"

namespace tern {

struct VmConfig {
  std::string kernel_path;  ///< bzImage (x86 boot protocol ≥ 2.12, 64-bit) or vmlinux (ELF).
  BootProtocol boot_protocol = BootProtocol::kAuto;  ///< --boot-protocol (boot_inputs.h).
  /// --on-reboot / boot-source "on_reboot" as given; unset: the boot's default
  /// (BootInputs::default_on_reboot: restart for a firmware boot, exit for a kernel).
  std::optional<OnReboot> on_reboot;
  std::optional<std::string> initrd_path;
  /// --firmware: boot this BIOS/UEFI image instead of a kernel (kernel_path then empty).
  std::optional<std::string> firmware_path;
  /// --firmware-vars: the UEFI variable store file (only with a UEFI firmware_path).
  std::optional<std::string> firmware_vars_path;
  std::string cmdline;                    ///< Final kernel command line (defaults applied).
  uint64_t memory_bytes = 512ull << 20;   ///< Guest RAM in bytes (multiple of 4 KiB).
  uint32_t vcpus = 1;
  std::string console = "stdio";         ///< "stdio" or "file:PATH".
  /// What backs guest RAM (--memory-backend); unset = automatic (choose_memory_backend()).
  std::optional<MemoryBackend> memory_backend;
  /// In-kernel exit accounting (--kernel-exits, config "kernel-exits"): started before the first
  /// KVM_RUN; when it cannot start, one warning and the VM runs without it.
  bool kernel_exits = false;
  /// Where vCPU and device worker threads run (--cpu-affinity), already checked; empty: no pinning.
  CpuAffinity cpu_affinity;
  /// In PCI slot order: the disks (the first is /dev/vda), then the rng.
  std::vector<DeviceSpec> devices;
};

/// The backend guest RAM gets: `chosen` when given, else memfd when a disk is served by a
/// vhost-user back-end (DiskConfig::vhost_user_socket non-empty: the back-end maps guest RAM),
/// else anon. An explicit anon with a vhost-user disk is refused; the error names `option`
/// ("--memory-backend", "machine-config.memory_backend").
[[nodiscard]] Result<MemoryBackend> choose_memory_backend(std::optional<MemoryBackend> chosen,
                                                          const std::vector<DeviceSpec>& devices,
                                                          const std::string& option);

/// The command line tern uses when none is given.
inline constexpr const char* kDefaultCmdline = "console=ttyS0 reboot=k panic=1";

/// `cmdline` with "console=ttyS0" appended when it names no console= at all.
std::string with_default_console(const std::string& cmdline);

}  // namespace tern
