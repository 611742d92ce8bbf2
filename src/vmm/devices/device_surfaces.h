// The user surface of the single-instance and keyed list device kinds, resolved through the kind
// table (device_kinds.h): what `tern run` options, PUT <api_path>[/{id}], the config file and
// GET /vm/config do with a kind's spec. The tables themselves are config/device_surface.h's
// device_surfaces() and keyed_surfaces().
#pragma once

#include <any>
#include <nlohmann/json.hpp>
#include <string>
#include <optional>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "config/device_surface.h"
#include "vmm/devices/device_kinds.h"

namespace tern {

/// The spec a DeviceSurface::from_json value (api::PutDevice) holds, as a DeviceSpec of its
/// kind; an error only for a value of another kind (a programming error).
[[nodiscard]] Result<DeviceSpec> device_spec_of(size_t kind, const std::any& value);
/// Parses a kind's JSON body (config-file value) into a DeviceSpec; errors as from_json's.
[[nodiscard]] Result<DeviceSpec> device_from_json(const DeviceSurface& s, const nlohmann::json& j,
                                                  const std::string& where);
/// Parses a kind's command-line SPEC ("" when the option is given alone).
[[nodiscard]] Result<DeviceSpec> device_from_cli(const DeviceSurface& s, std::string_view spec);
/// Parses one element of a keyed kind's config-file array / PUT body; errors as from_json's.
[[nodiscard]] Result<DeviceSpec> device_from_json(const KeyedSurface& s, const nlohmann::json& j,
                                                  const std::string& where);
/// Parses the `index`-th value of a keyed kind's repeatable option into the device with id
/// kCliIdPrefix + index ("net0").
[[nodiscard]] Result<DeviceSpec> device_from_cli(const KeyedSurface& s, std::string_view spec,
                                                 size_t index);
/// The spec as GET /vm/config renders it under its kind's config_key (a keyed kind: one element
/// of the array); a disk renders as null (drives have their own section).
[[nodiscard]] nlohmann::json device_to_json(const DeviceSpec& spec);
/// The spec of kind `Spec` among `devices`, if any.
template <class Spec>
[[nodiscard]] std::optional<Spec> find_device(const std::vector<DeviceSpec>& devices) {
  for (const DeviceSpec& d : devices)
    if (const Spec* s = std::get_if<Spec>(&d)) return *s;
  return std::nullopt;
}
/// The id of a keyed kind's spec ("net0"); nullopt for the other kinds.
[[nodiscard]] std::optional<std::string> device_id(const DeviceSpec& spec);
/// Replaces the spec of `spec`'s kind (a keyed kind: of its kind and id) in `devices` or adds
/// it (a keyed kind: after the others of its kind); `devices` stays in kind order.
void put_device(std::vector<DeviceSpec>& devices, DeviceSpec spec);
/// Whether `devices` holds a device of keyed kind `kind` with id `id`.
[[nodiscard]] bool has_device(const std::vector<DeviceSpec>& devices, size_t kind,
                              std::string_view id);
/// The most PCI devices a VM has: slots 1-31 of bus 0 (slot 0 is the host bridge; pci_root.h).
inline constexpr size_t kMaxPciDevices = 31;
/// Refuses a VM with more than kMaxPciDevices PCI devices — `disks` disks (they take the first
/// slots), then `devices` (the other kinds, in kind order) — before any is made (an image opened,
/// a tap attached). The error names the option (`cli`: "--disk", "--net") or the config field
/// ("drives", "network-interfaces[3]") of the first device that gets no slot.
[[nodiscard]] Result<void> check_pci_slots(size_t disks, const std::vector<DeviceSpec>& devices,
                                           bool cli);
/// Each keyed device's check against the VM (a network interface: queues ≤ vcpus) and against
/// the devices of its kind before it (a network interface: not the same tap or MAC). Errors name
/// the field as the command line does ("--net queues") when `cli`, else as the config file and
/// GET /vm/config do ("network-interfaces[1].queues", the index within its kind).
[[nodiscard]] Result<void> check_devices_for_vm(const std::vector<DeviceSpec>& devices,
                                                uint32_t vcpus, bool cli);
/// The surface of the spec's kind, or null (a disk, a keyed kind).
[[nodiscard]] const DeviceSurface* device_surface_of(const DeviceSpec& spec);
/// The keyed surface of the spec's kind, or null.
[[nodiscard]] const KeyedSurface* keyed_surface_of(const DeviceSpec& spec);

}  // namespace tern
