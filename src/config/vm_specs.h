// The value types a VM is configured with — Firecracker's request bodies (BootSource,
// MachineConfiguration, Drive, the snapshot parameters) as tern reads them. Plain values, shared by
// the API parser (src/api), the configuration (src/vmm/vm_resources.h) and the CLI; this folder
// includes nothing above src/block and src/virtio/rng, so neither side includes the other.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "block/disk_config.h"
#include "base/cpu_affinity.h"
#include "memory/memory_backend.h"

namespace tern {

/// Most vCPUs a tern guest may have (APIC IDs 0..253; the IOAPIC takes the next ID).
inline constexpr uint32_t kMaxVcpus = 254;

/// How the kernel is entered (`tern run --boot-protocol`, boot-source "boot_protocol"):
/// kPvh: uncompressed, at its XEN_ELFNOTE_PHYS32_ENTRY with an hvm_start_info (an ELF vmlinux, or
/// a bzImage whose payload tern decompresses on the host); kBzImage: the bzImage's own 64-bit
/// entry (the kernel decompresses itself); kAuto: PVH for an ELF vmlinux,
/// the bzImage entry for a bzImage (docs/boot.md says why).
enum class BootProtocol { kAuto, kPvh, kBzImage };

/// "auto", "pvh", "bzimage".
[[nodiscard]] constexpr std::string_view boot_protocol_name(BootProtocol p) {
  switch (p) {
    case BootProtocol::kPvh: return "pvh";
    case BootProtocol::kBzImage: return "bzimage";
    case BootProtocol::kAuto: break;
  }
  return "auto";
}

/// The BootProtocol named `s` ("auto", "pvh", "bzimage"), or nullopt.
[[nodiscard]] constexpr std::optional<BootProtocol> parse_boot_protocol(std::string_view s) {
  for (BootProtocol p : {BootProtocol::kAuto, BootProtocol::kPvh, BootProtocol::kBzImage})
    if (s == boot_protocol_name(p)) return p;
  return std::nullopt;
}

/// What a guest reset request does (`tern run --on-reboot`, boot-source "on_reboot"; QEMU's
/// -no-reboot is kExit). A reset request is the ACPI reset register, the i8042 pulse (0xFE), a
/// triple fault (KVM_EXIT_SHUTDOWN) or KVM_SYSTEM_EVENT_RESET. kExit: tern exits with status 3
/// (4 for a triple fault); kRestart: the VM is reset and boots again in the same process
/// (docs/lifecycle.md "Reboot in place").
enum class OnReboot { kExit, kRestart };

/// "exit", "restart".
[[nodiscard]] constexpr std::string_view on_reboot_name(OnReboot a) {
  return a == OnReboot::kRestart ? "restart" : "exit";
}

/// The OnReboot named `s` ("exit", "restart"), or nullopt.
[[nodiscard]] constexpr std::optional<OnReboot> parse_on_reboot(std::string_view s) {
  for (OnReboot a : {OnReboot::kExit, OnReboot::kRestart})
    if (s == on_reboot_name(a)) return a;
  return std::nullopt;
}

/// PUT /boot-source (Firecracker BootSource, plus tern's "boot_protocol", "firmware_path",
/// "firmware_vars_path" and "on_reboot"). Exactly one of kernel_image_path (non-empty) and firmware_path is given.
struct BootSource {
  std::string kernel_image_path;  ///< Empty for a firmware boot.
  std::optional<std::string> initrd_path;
  std::optional<std::string> boot_args;  ///< Absent: tern's default command line.
  /// tern extension "boot_protocol" (absent: kAuto; GET renders it only when not kAuto).
  BootProtocol boot_protocol = BootProtocol::kAuto;
  /// tern extension "firmware_path" (--firmware): a BIOS or UEFI image mapped below 4 GiB and run
  /// from the reset vector instead of a kernel (docs/firmware.md).
  std::optional<std::string> firmware_path = std::nullopt;
  /// tern extension "firmware_vars_path" (--firmware-vars): the UEFI variable store (pflash),
  /// only with a UEFI firmware_path.
  std::optional<std::string> firmware_vars_path = std::nullopt;
  /// tern extension "on_reboot" ("exit" | "restart"; absent: the boot's default — restart for a
  /// firmware boot, exit for a direct kernel boot; GET renders it only when given).
  std::optional<OnReboot> on_reboot{};
};

/// PUT|PATCH /machine-config (Firecracker MachineConfiguration), with Firecracker's defaults.
struct MachineConfig {
  uint32_t vcpu_count = 1;
  uint64_t mem_size_mib = 128;
  bool smt = false;                ///< Only false is supported.
  bool track_dirty_pages = false;  ///< Only false is supported (until snapshots exist).
  /// "None", or "2M": guest RAM on 2 MiB hugetlbfs pages (tern's memory_backend "hugetlbfs").
  std::string huge_pages = "None";
  /// tern extension "memory_backend" (--memory-backend): unset = automatic (memfd when a
  /// vhost-user disk is configured, else anon).
  std::optional<MemoryBackend> memory_backend;
  /// tern extension "cpu_affinity" (--cpu-affinity): {"vcpu0": "0-1", "io": "0"}; empty: none.
  CpuAffinity cpu_affinity;
};

/// PUT /drives/{drive_id} (Firecracker Drive) mapped onto tern's DiskConfig. A `tern run --disk`
/// disk is one too: drive_id "vda", "vdb", ... (the guest's name for it), not a root device.
struct DriveSpec {
  std::string drive_id;
  bool is_root_device = false;
  std::optional<std::string> partuuid;
  std::string cache_type = "Unsafe";  ///< As given (Firecracker or tern name), for GET /vm/config.
  std::string io_engine = "Sync";     ///< As given, for GET /vm/config.
  DiskConfig disk;                    ///< path, cache mode, read-only, engine.
};

/// A PATCH /machine-config body: only the fields given.
struct MachineConfigPatch {
  std::optional<uint32_t> vcpu_count;
  std::optional<uint64_t> mem_size_mib;
  std::optional<bool> smt;
  std::optional<bool> track_dirty_pages;
  std::optional<std::string> huge_pages;
  std::optional<MemoryBackend> memory_backend;
  std::optional<CpuAffinity> cpu_affinity;
};

/// PUT /snapshot/create (Firecracker SnapshotCreateParams, Full only) plus tern's extensions.
struct SnapshotCreateSpec {
  std::string snapshot_path;            ///< The state file (sections, checksummed).
  std::string mem_file_path;            ///< Guest RAM at file offset = guest-physical address.
  uint64_t rate_limit_bytes_per_s = 0;  ///< tern extension "rate_limit_bytes_per_s"; 0: none.
  bool direct = false;                  ///< tern extension "direct": O_DIRECT memory file writes.
};

/// PUT /snapshot/load (Firecracker SnapshotLoadParams, mem_backend File only).
struct SnapshotLoadSpec {
  std::string snapshot_path;
  std::string mem_file_path;  ///< mem_backend.backend_path (or the deprecated mem_file_path).
  bool resume_vm = false;
  /// tern extension "memory_backend" (tern restore --memory-backend): unset = automatic, as at
  /// boot, from the restored devices.
  std::optional<MemoryBackend> memory_backend = std::nullopt;
  /// tern extension "on_reboot" (tern restore --on-reboot): unset = what the saved VM did
  /// (restart for a firmware boot by default). restart needs a firmware-booted snapshot.
  std::optional<OnReboot> on_reboot = std::nullopt;
  /// tern extension "cpu_affinity" (tern restore --cpu-affinity): not saved in the snapshot (a
  /// host choice, like the backend); unset: threads keep tern's affinity.
  CpuAffinity cpu_affinity = {};
};

}  // namespace tern
