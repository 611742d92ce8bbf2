// BootInputs: the user's VM description read and validated — files loaded, kernel parsed,
// command line, sizes and placement checked — before KVM or any thread is touched.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "arch/x86/bzimage.h"
#include "arch/x86/elf_kernel.h"
#include "base/host_buffer.h"
#include "base/result.h"
#include "firmware/firmware_image.h"
#include "firmware/pflash/vars_file.h"
#include "devices/console/console_target.h"
#include "vmm/devices/made_device.h"
#include "config/vm_specs.h"
#include "vmm/vm_config.h"

namespace tern {

/// A VmConfig after validation, with the files it names already read, and the host side of the
/// VM (open disk images, taps, vhost-user connections: `devices`). Lives until the VM is built
/// (create_vm_machine), or for the VM's whole life when a guest reset restarts it (each reset
/// builds the VM again from it: Vm::create, "Reset rule" in vm.h). The kernel and initrd bytes
/// are in HostBuffers (their own mappings), so they go back to the OS when it is dropped, not
/// into malloc's free lists.
struct BootInputs {
  VmConfig config;
  /// The protocol chosen: kPvh or kBzImage (never kAuto), and why (for the log line).
  BootProtocol protocol = BootProtocol::kBzImage;
  std::string protocol_reason;
  /// kBzImage: the parsed bzImage with its payload. kPvh from a bzImage: its header fields only
  /// (payload emptied); kPvh from a vmlinux: default.
  x86::BzImage kernel;
  /// kPvh: the vmlinux (the file, or the bzImage's payload decompressed on the host) and its
  /// parsed program headers.
  HostBuffer elf_image;
  x86::ElfKernel elf;
  HostBuffer initrd;  ///< Empty when there is no initrd.
  /// --firmware: the image (page-aligned: mapped read-only into the guest as it is) and what
  /// check_firmware_image() found; empty for a kernel boot.
  HostBuffer firmware;
  firmware::FirmwareInfo firmware_info;
  /// --firmware-vars: the store, opened and locked (moved into the VM's pflash when it is built).
  std::shared_ptr<VarsFile> firmware_vars;
  ConsoleTarget console;
  /// What a guest reset does when the user gave no --on-reboot (VmConfig::on_reboot): kExit for
  /// a direct kernel boot (Firecracker's behaviour, which orchestrators on its API expect); a
  /// firmware boot sets kRestart (a real machine's, and what installers expect).
  OnReboot default_on_reboot = OnReboot::kExit;
  /// One device per config.devices entry, in order, made by the device registry (disk images
  /// already open): virtio devices and PCI function models (NVMe disks).
  std::vector<MadeDevice> devices;
};

/// Reads and validates everything `config` names. Each error names the field it concerns
/// (--kernel, --initrd, --cmdline, --memory, --cpus, --console) and what is wrong with it:
/// unreadable files, a file that is neither a 64-bit bzImage (or is truncated) nor a valid ELF
/// vmlinux, for PVH (config.boot_protocol kPvh, or kAuto with an ELF) a kernel without the PVH
/// entry note or a bzImage payload that does not decompress to one (kAuto with a bzImage falls
/// back to the bzImage entry instead, logging why; an ELF cannot take the bzImage path), a command line
/// longer than the kernel's cmdline_size, too little RAM for kernel + initrd, more RAM than the
/// host can back, an initrd that cannot be placed under initrd_addr_max, a vCPU count of 0 or
/// beyond what the MP table/APIC IDs allow, a malformed console target, a disk image that is
/// missing, not writable without readonly=on, or on a filesystem without O_DIRECT for cache=none
/// (--disk; see VirtioBlock::create), an rng rate limit the device refuses (--rng). With
/// config.firmware_path: a file that is not firmware (check_firmware_image), a --firmware-vars
/// with a BIOS, or a store that is missing, not writable, not a regular file, of a size that is
/// no multiple of 4 KiB or does not fit below the image in the 16 MiB under 4 GiB.
[[nodiscard]] Result<BootInputs> prepare_boot(const VmConfig& config);

/// prepare_boot()'s firmware step: reads `c.firmware_path` into in.firmware (checked:
/// firmware/firmware_image.h) and opens `c.firmware_vars_path` into in.firmware_vars (created from
/// the template when missing, locked). Errors name --firmware or --firmware-vars. Also used by a
/// restore, which maps the saved VM's firmware again (restore_inputs.cc).
[[nodiscard]] Result<void> prepare_firmware(const VmConfig& c, BootInputs& in);

/// The most a bzImage payload may decompress to (bytes) for a guest with `ram_bytes` of RAM: its
/// RAM below 3 GiB (the vmlinux's PT_LOAD segments must fit there, and a stripped vmlinux is little
/// more than its segments), at most 512 MiB. A small crafted payload (a zstd or gzip "bomb") makes
/// tern touch at most this much host memory before refusing it.
[[nodiscard]] uint64_t max_decompressed_kernel_bytes(uint64_t ram_bytes);

}  // namespace tern
