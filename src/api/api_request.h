// ApiRequest and ApiResponse: an HTTP request of the control API parsed and validated into a
// value (what the control thread executes), and the answer that goes back to the client.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "block/disk_config.h"

namespace tern {

/// PUT /boot-source (Firecracker BootSource).
struct BootSource {
  std::string kernel_image_path;
  std::optional<std::string> initrd_path;
  std::optional<std::string> boot_args;  ///< Absent: tern's default command line.
};

/// PUT|PATCH /machine-config (Firecracker MachineConfiguration), with Firecracker's defaults.
struct MachineConfig {
  uint32_t vcpu_count = 1;
  uint64_t mem_size_mib = 128;
  bool smt = false;                ///< Only false is supported.
  bool track_dirty_pages = false;  ///< Only false is supported (until snapshots exist).
  std::string huge_pages = "None"; ///< Only "None" is supported.
};

/// PUT /drives/{drive_id} (Firecracker Drive) mapped onto tern's DiskConfig.
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
};

namespace api {
struct GetInstanceInfo {};                                  ///< GET /
struct GetVersion {};                                       ///< GET /version
struct PutBootSource { BootSource value; };                 ///< PUT /boot-source
struct GetMachineConfig {};                                 ///< GET /machine-config
struct PutMachineConfig { MachineConfig value; };           ///< PUT /machine-config
struct PatchMachineConfig { MachineConfigPatch value; };    ///< PATCH /machine-config
struct PutDrive { DriveSpec value; };                       ///< PUT /drives/{drive_id}
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
struct CreateSnapshot { SnapshotCreateSpec value; };        ///< PUT /snapshot/create
struct LoadSnapshot { SnapshotLoadSpec value; };            ///< PUT /snapshot/load
}  // namespace api

/// One validated request of the control API.
using ApiRequest =
    std::variant<api::GetInstanceInfo, api::GetVersion, api::PutBootSource, api::GetMachineConfig,
                 api::PutMachineConfig, api::PatchMachineConfig, api::PutDrive,
                 api::InstanceStart, api::SendCtrlAltDel, api::FlushMetrics, api::PauseVm,
                 api::ResumeVm, api::GetVmConfig, api::GetStats, api::GetMetrics, api::GetEvents,
                 api::PowerOff, api::CreateSnapshot, api::LoadSnapshot>;

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
