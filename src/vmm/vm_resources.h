// VmResources: the one configuration of a tern VM (Firecracker's VmResources, Cloud Hypervisor's
// VmConfig). `tern run` options, a --config-file, the pre-boot API (PUT /boot-source,
// /machine-config, /drives, /entropy, /network-interfaces) and a restored snapshot all write it; every GET
// (/machine-config, /vm/config) renders from it; the VM is built from vm_config().
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "config/vm_specs.h"
#include "vmm/devices/device_surfaces.h"
#include "vmm/machine_state.h"
#include "vmm/vm_config.h"

namespace tern {

struct VmResources {
  std::optional<BootSource> boot;        ///< Kernel, initrd, boot_args as given; none yet: null.
  uint32_t vcpus = 1;                    ///< Checked when the VM is built (--cpus / vcpu_count).
  uint64_t memory_bytes = 128ull << 20;  ///< Guest RAM in bytes (Firecracker's default 128 MiB).
  std::string console = "stdio";         ///< "stdio" or "file:PATH".
  /// --memory-backend / machine-config "memory_backend"; unset = automatic.
  std::optional<MemoryBackend> memory_backend;
  /// machine-config "huge_pages": "None" or "2M" (= memory_backend hugetlbfs, free pages checked
  /// by vm_config() before anything is built).
  std::string huge_pages = "None";
  /// --cpu-affinity / machine-config "cpu_affinity"; checked by vm_config() (vCPU indexes, the
  /// CPUs tern may use) before anything is built.
  CpuAffinity cpu_affinity;
  std::vector<DriveSpec> drives;         ///< In the order configured (--disk or PUT /drives).
  /// In-kernel exit accounting from the first KVM_RUN (--kernel-exits, config file and
  /// pre-boot PUT /tern/kernel-exits {"enabled": true}; GET /vm/config "kernel-exits").
  bool kernel_exits = false;
  /// The other devices configured (device_surfaces.h), in kind order (after the drives in the
  /// PCI slot order): at most one of a single-instance kind (--rng, PUT /entropy), those of a
  /// keyed list kind (--net, PUT /network-interfaces/{id}) in the order first configured, one
  /// per id.
  std::vector<DeviceSpec> devices;

  /// The device of kind `Spec` (RngSpec, ...), if configured.
  template <class Spec>
  [[nodiscard]] std::optional<Spec> device() const {
    return find_device<Spec>(devices);
  }
  /// PUT <api_path>: sets (replaces) the device of spec's kind; PUT <api_path>/{id} of a keyed
  /// kind: replaces the device with the same id or adds it.
  void put_device(DeviceSpec spec) { tern::put_device(devices, std::move(spec)); }
  /// Whether the keyed kind `kind` has a device `id` (PATCH <api_path>/{id}).
  [[nodiscard]] bool has_device(size_t kind, std::string_view id) const {
    return tern::has_device(devices, kind, id);
  }

  /// GET /machine-config (mem_size_mib rounds memory_bytes down to MiB).
  [[nodiscard]] MachineConfig machine_config() const;
  /// PUT /machine-config (already validated by parse_machine_config()).
  void set_machine_config(const MachineConfig& m);
  /// PATCH /machine-config: applies the fields given, then checks the result
  /// (check_machine_config); on error nothing changes.
  [[nodiscard]] Result<void> patch_machine_config(const MachineConfigPatch& p);
  /// PUT /drives/{id}: replaces the drive with the same id or appends it. At most one root
  /// device ("is_root_device: drive \"x\" is already the root device").
  [[nodiscard]] Result<void> put_drive(const DriveSpec& d);

  /// The VM to build: the command line with tern's defaults (console=ttyS0; root= for a root
  /// drive, as Firecracker adds it), the root drive first as /dev/vda, the other drives in
  /// order, then the other devices in kind order. Errors name the drive, or the keyed device's
  /// field that does not fit the VM ("network-interfaces[0].queues": more than the vCPUs).
  [[nodiscard]] Result<VmConfig> vm_config() const;
  /// GET /vm/config: Firecracker's full configuration object ("drives", every single-instance
  /// kind's key ("entropy": null when absent), every keyed kind's array ("network-interfaces"),
  /// ...).
  [[nodiscard]] nlohmann::json vm_config_json() const;

  /// The configuration a snapshot's machine section describes (tern restore, PUT
  /// /snapshot/load): vCPUs, RAM, kernel and command line (as boot_args), disks as drives
  /// "vda", "vdb", ... and the other devices; the guest console is `console`.
  [[nodiscard]] static VmResources from_machine_state(const snap::MachineState& m,
                                                      std::string console);
};

/// A `tern run --disk` disk as a drive: drive_id "vda", "vdb", ... (index 0 → "vda", 26 →
/// "vdaa", as Linux names virtio disks) or, for an NVMe disk, "nvme0", "nvme1", ... (`index`
/// counts the disks of the same interface before it), not a root device, cache_type and io_engine by tern's
/// names ("writeback", "io_uring"; empty for a vhost-user disk, whose back-end has them).
[[nodiscard]] DriveSpec drive_for_disk(const DiskConfig& disk, size_t index);

}  // namespace tern
