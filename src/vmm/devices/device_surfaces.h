// The user surface of the single-instance device kinds, resolved through the kind table
// (device_kinds.h): what `tern run` options, PUT <api_path>, the config file and GET /vm/config
// do with a kind's spec. The table itself is config/device_surface.h's device_surfaces().
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
/// The spec as GET /vm/config renders it under its kind's config_key; a disk renders as null
/// (drives have their own section).
[[nodiscard]] nlohmann::json device_to_json(const DeviceSpec& spec);
/// The spec of kind `Spec` among `devices`, if any.
template <class Spec>
[[nodiscard]] std::optional<Spec> find_device(const std::vector<DeviceSpec>& devices) {
  for (const DeviceSpec& d : devices)
    if (const Spec* s = std::get_if<Spec>(&d)) return *s;
  return std::nullopt;
}
/// Replaces the spec of `spec`'s kind in `devices` or adds it; `devices` stays in kind order.
void put_device(std::vector<DeviceSpec>& devices, DeviceSpec spec);
/// The surface of the spec's kind, or null (a disk).
[[nodiscard]] const DeviceSurface* device_surface_of(const DeviceSpec& spec);

}  // namespace tern
