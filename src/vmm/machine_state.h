// MachineState: the part of a snapshot that says which VM to rebuild before any state is applied —
// RAM size, vCPU count, the kernel and command line it booted with, and its devices (each kind's
// spec and the host facts a restore checks, see vmm/devices/device_registry.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "config/vm_specs.h"
#include "snapshot/codec.h"
#include "vmm/devices/device_registry.h"

namespace tern::snap {

/// The firmware a firmware-booted VM (--firmware) ran from: a restore maps the same image again
/// read-only (the guest may be executing it) and refuses a file whose size or checksum changed.
struct SavedFirmware {
  std::string path;       ///< --firmware as given.
  uint64_t size = 0;      ///< Bytes (1 byte .. 16 MiB).
  uint32_t crc32 = 0;     ///< zlib crc32 of the whole image (detects an updated or other file).
  std::string vars_path;  ///< --firmware-vars; empty: none.
  bool operator==(const SavedFirmware&) const = default;
};

/// The machine section. Version 7 (written): memory, vCPUs, command line, kernel and initrd
/// paths, then per device its kind ("virtio-blk", "virtio-rng"), spec and facts, then the VM's
/// on_reboot and its firmware (a flag, then SavedFirmware). Versions 2 to 6 (no on_reboot: exit;
/// no firmware) are still read. Version 2
/// (before vhost-user; still read): the same with disk specs that end before the vhost-user
/// socket. Version 1 (tern ≤ 0.1 before the device registry; still read): memory, vCPUs,
/// command line, disks only.
struct MachineState {
  uint64_t memory_bytes = 0;  ///< Guest RAM in bytes (multiple of 4 KiB).
  uint32_t vcpus = 0;
  std::string cmdline;               ///< For GET /vm/config and the operator; not re-applied.
  std::string kernel_path;           ///< For GET /vm/config (boot-source); empty in version 1.
  std::string initrd_path;           ///< Empty: none (or version 1).
  std::vector<SavedDevice> devices;  ///< In PCI slot order.
  /// What a guest reset does in the saved VM (version 7; before: kExit). A restore keeps it
  /// unless told otherwise (tern restore --on-reboot).
  OnReboot on_reboot = OnReboot::kExit;
  /// A firmware boot's image (version 7); empty for a direct kernel boot.
  std::optional<SavedFirmware> firmware;
};

/// Writes the current version (kMachineSectionVersion).
void encode_machine_state(ByteWriter& w, const MachineState& m);
/// Decodes the current version. Validates as untrusted input: memory 4 KiB-aligned and
/// 1 MiB..1 TiB, vCPUs 1..254, at most 64 devices, each spec valid for its kind, on_reboot 0/1,
/// a firmware of 1 byte..16 MiB with a non-empty path (no kernel then). Errors name the field.
[[nodiscard]] Result<MachineState> decode_machine_state(ByteReader& r);
/// Decodes `version` (1 to kMachineSectionVersion).
[[nodiscard]] Result<MachineState> decode_machine_state_version(ByteReader& r, uint32_t version);

}  // namespace tern::snap
