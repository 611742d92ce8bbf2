// The user surface of the single-instance device kinds (virtio-rng, ...): the command-line
// option, API path and configuration key each kind is configured by. The table is defined by
// the device registry (src/vmm/devices/device_surfaces.cc) from each Kind's surface members
// (device_kinds.h); this header is a leaf so the API parser (src/api), which must not include
// src/vmm, routes PUT <api_path> through it. Disks (drives) keep their own surface.
#pragma once

#include <any>
#include <cstddef>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string>
#include <string_view>

#include "base/result.h"

namespace tern {

/// One kind's surface. A Kind of device_kinds.h has one when it declares kConfigKey.
struct DeviceSurface {
  size_t kind;                   ///< The kind's index in DeviceKinds (the DeviceSpec alternative).
  std::string_view config_key;   ///< Config-file key and GET /vm/config key ("entropy").
  std::string_view api_path;     ///< PUT path of the pre-boot API ("/entropy").
  std::string_view cli_option;   ///< `tern run` option, taking an optional SPEC ("--rng").
  std::string_view cli_help;     ///< The option's help text.
  /// Parses and validates a JSON body (PUT api_path, the config file's value); errors name the
  /// field under `where` ("entropy.rate_limiter.ops.size"). The value holds the kind's Spec.
  Result<std::any> (*from_json)(const nlohmann::json& j, const std::string& where);
};

/// Every kind's surface, in DeviceKinds order.
[[nodiscard]] std::span<const DeviceSurface> device_surfaces();
/// The surface whose api_path is `path`, or null.
[[nodiscard]] const DeviceSurface* device_surface_for_path(std::string_view path);

}  // namespace tern
