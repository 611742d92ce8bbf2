// The control API's request parser: method + target + body → a validated ApiRequest, or the error
// response to send. Runs on the API thread; touches no VM state. The section parsers are shared
// with the --config-file reader (src/vmm/config_file.h).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

#include <tl/expected.hpp>

#include "api/api_request.h"
#include "base/result.h"

namespace tern {

/// Largest request body accepted (a bigger Content-Length is answered 413 before reading it).
inline constexpr size_t kMaxApiBodyBytes = 64 * 1024;

/// Parses one request. Errors are 400 with a fault_message naming the field (Firecracker's shape):
/// malformed JSON, wrong types, unknown fields, a Firecracker endpoint tern does not support, an
/// unknown path or method.
[[nodiscard]] tl::expected<ApiRequest, ApiResponse> parse_api_request(std::string_view method,
                                                                       std::string_view target,
                                                                       std::string_view body);

/// Firecracker's BootSource object; errors name "<where>.<field>". Checks the files are readable.
[[nodiscard]] Result<BootSource> parse_boot_source(const nlohmann::json& j, const std::string& where);
/// Firecracker's MachineConfiguration object (PUT semantics: absent optional fields get defaults).
[[nodiscard]] Result<MachineConfig> parse_machine_config(const nlohmann::json& j,
                                                         const std::string& where);
/// A partial MachineConfiguration (PATCH /machine-config).
[[nodiscard]] Result<MachineConfigPatch> parse_machine_config_patch(const nlohmann::json& j,
                                                                    const std::string& where);
/// Checks the values tern supports (smt, huge_pages, track_dirty_pages, vcpu_count range).
[[nodiscard]] Result<void> check_machine_config(const MachineConfig& m, const std::string& where);
/// Firecracker's Drive object. Maps cache_type (Unsafe, Writeback, or tern's writeback, none,
/// unsafe, directsync) and io_engine (Sync → threads, Async → io_uring, or tern's names); tern's
/// extensions queues (1..64) and queue_size (power of two, 2..1024). With "socket" a
/// vhost-user-block drive (DiskConfig::vhost_user_socket): path_on_host, is_read_only true,
/// cache_type, io_engine and rate_limiter are refused by name (the back-end's). A relative
/// path_on_host is kept absolute, resolved against tern's current directory (absolute_host_path):
/// GET /vm/config shows that path.
[[nodiscard]] Result<DriveSpec> parse_drive(const nlohmann::json& j, const std::string& where);

/// {"enabled": true|false} (PUT /tern/kernel-exits, config "kernel-exits"); "enabled" is required,
/// other fields are refused by name ("<where>.<field>").
[[nodiscard]] Result<KernelExitsSetting> parse_kernel_exits(const nlohmann::json& j,
                                                            const std::string& where);

/// JSON forms for GET /machine-config and GET /vm/config (a drive: as parse_drive reads it).
[[nodiscard]] nlohmann::json to_json(const MachineConfig& m);
[[nodiscard]] nlohmann::json to_json(const BootSource& b);
[[nodiscard]] nlohmann::json to_json(const DriveSpec& d);

}  // namespace tern
