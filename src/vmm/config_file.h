// Reading `tern --config-file FILE`: Firecracker's config-file JSON (boot-source, machine-config,
// drives, each device kind's key ("entropy", device_surfaces.h), and the sections tern does not support, which must be null or empty).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "config/vm_specs.h"
#include "vmm/vm_resources.h"

namespace tern {

/// The VM a config file describes, validated (fields checked, files readable).
struct ConfigFile {
  BootSource boot;
  MachineConfig machine;  ///< Firecracker's defaults when "machine-config" is absent.
  std::vector<DriveSpec> drives;
  /// The devices, by their kinds' keys: a single-instance kind's object ("entropy"; null: none),
  /// a keyed kind's array ("network-interfaces", each id once). In kind order.
  std::vector<DeviceSpec> devices;
  /// tern's "kernel-exits" section ({"enabled": true}, as PUT /tern/kernel-exits): in-kernel exit
  /// accounting from the first KVM_RUN. Absent or null: off.
  bool kernel_exits = false;
  /// The device of kind `Spec`, if the file configures one.
  template <class Spec>
  [[nodiscard]] std::optional<Spec> device() const {
    return find_device<Spec>(devices);
  }

  /// The configuration this file describes (the guest console on stdio).
  [[nodiscard]] VmResources resources() const;
};

/// Parses the JSON text of a config file; errors name the field ("machine-config.vcpu_count").
[[nodiscard]] Result<ConfigFile> parse_config_file(std::string_view text);
/// Reads and parses the file at `path`; errors start with the path.
[[nodiscard]] Result<ConfigFile> read_config_file(const std::string& path);

}  // namespace tern
