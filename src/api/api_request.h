// ApiRequest and ApiResponse: an HTTP request of the control API parsed and validated into a
// value (what the control thread executes), and the answer that goes back to the client. The
// bodies' value types live in src/config/vm_specs.h.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <any>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "config/vm_specs.h"

namespace tern {

/// The body of PUT /tern/kernel-exits and the config file's "kernel-exits" section: in-kernel exit
/// accounting on or off (docs/stats.md, "In-kernel exits").
struct KernelExitsSetting {
  bool enabled = false;
};

namespace api {
struct GetInstanceInfo {};                                  ///< GET /
struct GetVersion {};                                       ///< GET /version
struct PutBootSource { BootSource value; };                 ///< PUT /boot-source
struct GetMachineConfig {};                                 ///< GET /machine-config
struct PutMachineConfig { MachineConfig value; };           ///< PUT /machine-config
struct PatchMachineConfig { MachineConfigPatch value; };    ///< PATCH /machine-config
struct PutDrive { DriveSpec value; };                       ///< PUT /drives/{drive_id}
/// PUT /entropy (and every single-instance device kind's path, config/device_surface.h): the
/// kind's validated Spec, resolved by the control loop through the kind table.
struct PutDevice {
  std::string path;  ///< "/entropy"
  size_t kind;       ///< DeviceSurface::kind
  std::any spec;     ///< The kind's Spec, as DeviceSurface::from_json returned it.
};
/// PUT /network-interfaces/{iface_id} (and every keyed list kind's path, config/device_surface.h):
/// the kind's validated Spec, whose id matches the path's.
struct PutKeyedDevice {
  std::string path;  ///< "/network-interfaces"
  size_t kind;       ///< KeyedSurface::kind
  std::string id;    ///< "{iface_id}" of the path
  std::any spec;     ///< The kind's Spec, as KeyedSurface::from_json returned it.
};
/// PATCH /network-interfaces/{iface_id}: a checked body that changes nothing tern can change yet
/// (Firecracker patches the rate limiters, which tern refuses); the device must exist.
struct PatchKeyedDevice {
  std::string path;  ///< "/network-interfaces"
  size_t kind;       ///< KeyedSurface::kind
  std::string id;    ///< "{iface_id}" of the path
};
struct InstanceStart {};                                    ///< PUT /actions InstanceStart
struct SendCtrlAltDel {};                                   ///< PUT /actions SendCtrlAltDel
struct FlushMetrics {};                                     ///< PUT /actions FlushMetrics
struct PauseVm {};                                          ///< PATCH /vm {"state":"Paused"}
struct ResumeVm {};                                         ///< PATCH /vm {"state":"Resumed"}
struct GetVmConfig {};                                      ///< GET /vm/config
struct GetStats {};                                         ///< GET /tern/stats
struct GetMetrics {};                                       ///< GET /tern/metrics
struct GetEvents {};                                        ///< GET /tern/events (a stream)
struct PowerOff {};                                         ///< PUT /tern/power-off
struct PutKernelExits { KernelExitsSetting value; };        ///< PUT /tern/kernel-exits
struct CreateSnapshot { SnapshotCreateSpec value; };        ///< PUT /snapshot/create
struct LoadSnapshot { SnapshotLoadSpec value; };            ///< PUT /snapshot/load
}  // namespace api

/// One validated request of the control API.
using ApiRequest =
    std::variant<api::GetInstanceInfo, api::GetVersion, api::PutBootSource, api::GetMachineConfig,
                 api::PutMachineConfig, api::PatchMachineConfig, api::PutDrive, api::PutDevice,
                 api::PutKeyedDevice, api::PatchKeyedDevice, api::InstanceStart, api::SendCtrlAltDel, api::FlushMetrics, api::PauseVm,
                 api::ResumeVm, api::GetVmConfig, api::GetStats, api::GetMetrics, api::GetEvents,
                 api::PowerOff, api::PutKernelExits, api::CreateSnapshot, api::LoadSnapshot>;

/// The answer to one request: status, content type and body (empty for 204).
struct ApiResponse {
  int status = 204;
  std::string content_type;
  std::string body;

  /// 204 No Content.
  static ApiResponse no_content() { return {}; }
  /// 200 with a JSON body, serialised by json_text().
  static ApiResponse json(const nlohmann::json& body, int status = 200);
  /// Not for text that already is JSON: it would be sent as one JSON string ("\"{...}\"").
  static ApiResponse json(const std::string& already_serialised, int status = 200) = delete;
  /// 200 with a text body of type `content_type`.
  static ApiResponse text(std::string body, std::string content_type);
  /// An error in Firecracker's shape: {"fault_message": "..."}.
  static ApiResponse error(int status, const std::string& fault_message);
};

/// The one way tern serialises the JSON it sends (API responses, event-stream lines): compact, with
/// bytes that are not UTF-8 replaced by U+FFFD instead of throwing (paths and command lines given
/// on tern's command line may hold any bytes).
[[nodiscard]] std::string json_text(const nlohmann::json& j);

}  // namespace tern
