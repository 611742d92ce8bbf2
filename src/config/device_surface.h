// The user surface of the single-instance device kinds (virtio-rng, ...): the command-line
// option, API path and configuration key each kind is configured by. The table is defined by
// the device registry (src/vmm/devices/device_surfaces.cc) from each Kind's surface members
// (device_kinds.h); this header is a leaf so the API parser (src/api), which must not include
// src/vmm, routes PUT <api_path> through it. The keyed list kinds (network interfaces: several
// per VM, each named by an id) have a KeyedSurface: PUT/PATCH <api_path>/{id}, a config-file
// array, a repeatable option. Disks (drives) keep their own surface.
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

/// Every single-instance kind's surface, in DeviceKinds order.
[[nodiscard]] std::span<const DeviceSurface> device_surfaces();
/// The surface whose api_path is `path`, or null.
[[nodiscard]] const DeviceSurface* device_surface_for_path(std::string_view path);

/// One keyed list kind's surface (network interfaces). A Kind has one when it declares kIdField.
struct KeyedSurface {
  size_t kind;                   ///< The kind's index in DeviceKinds (the DeviceSpec alternative).
  std::string_view config_key;   ///< Config-file and GET /vm/config key: an array ("network-interfaces").
  std::string_view api_path;     ///< PUT/PATCH <api_path>/{id} ("/network-interfaces").
  std::string_view id_field;     ///< The body's id field, which must match {id} ("iface_id").
  std::string_view cli_option;   ///< Repeatable `tern run` option taking a SPEC ("--net").
  std::string_view cli_help;     ///< The option's help text.
  /// Parses and validates one element (PUT body, config-file array element); errors name the
  /// field under `where` ("network-interfaces[0].guest_mac"). The value holds the kind's Spec.
  Result<std::any> (*from_json)(const nlohmann::json& j, const std::string& where);
  /// The id of a from_json value.
  std::string (*id_of)(const std::any& spec);
  /// Checks a PATCH body (only what tern can change on a live device; errors name the field).
  Result<void> (*check_patch)(const nlohmann::json& j, const std::string& where);
};

/// Every keyed list kind's surface, in DeviceKinds order.
[[nodiscard]] std::span<const KeyedSurface> keyed_surfaces();
/// The keyed surface whose api_path is `path`'s prefix before "/{id}", or null; `id` gets the
/// rest (not empty, no '/').
[[nodiscard]] const KeyedSurface* keyed_surface_for_path(std::string_view path, std::string& id);

}  // namespace tern
