// PUT /drives/{id} of the API request parser (api_parser.h): Firecracker's Drive object, its
// vhost-user form, and tern's extensions (interface, queues, tuning, locking, format); and the
// Drive's JSON form for GET /vm/config.
#include <string>

#include "api/api_parser.h"
#include "api/api_parser_checks.h"
#include "api/json_reader.h"
#include "base/host_path.h"

namespace tern {

namespace {

// tern's extensions of the Drive object (both kinds of drive): "queues" 1..64 and "queue_size"
// (a power of two in 2..1024), as --disk queues= and queue_size=.
Result<void> parse_drive_queues(JsonReader& r, DiskConfig& disk) {
  ASSIGN_OR_RETURN(auto queues, r.optional_uint("queues", 1, 64));
  if (queues) disk.queues = static_cast<uint16_t>(*queues);
  ASSIGN_OR_RETURN(auto size, r.optional_uint("queue_size", 2, 1024));
  if (size) {
    if ((*size & (*size - 1)) != 0)
      return fail(r.field("queue_size"), std::to_string(*size) + " is not a power of two");
    disk.queue_size = static_cast<uint16_t>(*size);
  }
  return {};
}

// tern's extension "interface": "virtio" (default) | "nvme" (an emulated NVMe controller). An
// NVMe drive refuses the virtio-only fields by name: "socket" (a vhost-user back-end) and
// "queues" / "queue_size" (the guest creates its NVMe queues itself).
Result<void> parse_drive_interface(JsonReader& r, DiskConfig& disk) {
  ASSIGN_OR_RETURN(auto name, r.optional_string("interface"));
  if (!name) return {};
  auto i = parse_disk_interface(*name);
  if (!i)
    return fail(r.field("interface"), "\"" + *name + "\": unknown disk interface (virtio, nvme)");
  disk.interface = *i;
  if (disk.interface != DiskInterface::kNvme) return {};
  if (r.raw("socket")) return fail(r.field("socket"), "not with interface \"nvme\"");
  for (const char* f : {"queues", "queue_size"})
    if (r.raw(f))
      return fail(r.field(f),
                  "not with interface \"nvme\" (the guest creates its NVMe queues, one per vCPU)");
  for (const char* f : {"kick_suppress", "coalesce_us", "poll_us"})
    if (r.raw(f)) return fail(r.field(f), "not with interface \"nvme\" (virtio-blk only)");
  return {};
}

// A drive switch of tern's that the --disk key spells on|off: true or "on", false or "off"
// (unset: nullopt). Anything else is refused naming the field.
Result<std::optional<bool>> optional_on_off(JsonReader& r, const char* name) {
  const nlohmann::json* v = r.raw(name);
  if (v == nullptr) return std::optional<bool>{};
  if (v->is_boolean()) return std::optional<bool>{v->get<bool>()};
  if (v->is_string() && (*v == "on" || *v == "off")) return std::optional<bool>{*v == "on"};
  // A string is shown as JSON (escaped: a NUL does not cut the message) and at most 64 bytes.
  std::string shown = v->is_string()
                          ? v->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                          : json_type_name(*v);
  if (shown.size() > 64) shown = shown.substr(0, 64) + "...";
  return fail(r.field(name), "expected true, false, \"on\" or \"off\", got " + shown);
}

// tern's extensions for a drive tern serves (--disk kick_suppress=, coalesce_us=, poll_us=;
// virtio/notify_tuning.h): "kick_suppress" on/off, "coalesce_us" and "poll_us" 0..10000.
Result<void> parse_drive_tuning(JsonReader& r, DiskConfig& disk) {
  ASSIGN_OR_RETURN(auto suppress, optional_on_off(r, "kick_suppress"));
  if (suppress) disk.kick_suppress = *suppress;
  ASSIGN_OR_RETURN(auto coalesce, r.optional_uint("coalesce_us", 0, kMaxNotifyTuningUs));
  if (coalesce) disk.coalesce_us = static_cast<uint32_t>(*coalesce);
  ASSIGN_OR_RETURN(auto poll, r.optional_uint("poll_us", 0, kMaxNotifyTuningUs));
  if (poll) disk.poll_us = static_cast<uint32_t>(*poll);
  return {};
}

// tern's extension "locking" (QEMU's locking=): true or "on" (default: the image is locked while
// open, block/image_lock.h), false or "off" (no lock: the image may be shared on purpose).
Result<void> parse_drive_locking(JsonReader& r, DiskConfig& disk) {
  ASSIGN_OR_RETURN(auto locking, optional_on_off(r, "locking"));
  if (locking) disk.locking = *locking;
  // tern's extensions "format" ("raw" | "qcow2"; absent: probed) and "backing_files" (on/off).
  ASSIGN_OR_RETURN(auto format, r.optional_string("format"));
  if (format) {
    auto f = parse_disk_format(*format);
    if (!f) return fail(r.field("format"), "\"" + *format + "\": unknown image format (raw, qcow2)");
    disk.format = *f;
  }
  ASSIGN_OR_RETURN(auto backing, optional_on_off(r, "backing_files"));
  if (backing) disk.backing_files = *backing;
  return {};
}

// A vhost-user-block drive (Firecracker's Drive with "socket"): the back-end serves the image,
// so the fields describing it (path_on_host, is_read_only true, cache_type, io_engine,
// rate_limiter) are refused by name. Whether the back-end listens is checked at InstanceStart.
Result<DriveSpec> parse_vhost_user_drive(JsonReader& r, DriveSpec d, std::string socket) {
  const std::string why = "not with socket: a vhost-user drive's ";
  if (r.raw("path_on_host"))
    return fail(r.field("path_on_host"), why + "image is the back-end's (omit the field)");
  ASSIGN_OR_RETURN(auto ro, r.optional_bool("is_read_only"));
  if (ro.value_or(false))
    return fail(r.field("is_read_only"),
                "true: " + why + "read-only access is the back-end's (export the disk read-only)");
  for (const char* f : {"cache_type", "io_engine", "rate_limiter", "locking", "format", "backing_files",
                        "kick_suppress",
                        "coalesce_us", "poll_us"})
    if (r.raw(f))
      return fail(r.field(f), why + std::string(f) + " belongs to the back-end (omit the field)");
  TRY(r.finish());
  if (socket.empty()) return fail(r.field("socket"), "empty path");
  if (socket.find('\0') != std::string::npos)
    return fail(r.field("socket"), "path contains a NUL byte");
  // Absolute, as path_on_host: a snapshot names the same back-end wherever tern restore runs.
  ASSIGN_OR_RETURN(socket, absolute_host_path(socket, r.field("socket")));
  if (socket.size() > kMaxVhostUserSocketBytes)
    return fail(r.field("socket"), "longer than " + std::to_string(kMaxVhostUserSocketBytes) +
                                       " bytes (sockaddr_un.sun_path)");
  d.disk.vhost_user_socket = std::move(socket);
  d.cache_type.clear();  // not the drive's: GET /vm/config leaves them out
  d.io_engine.clear();
  TRY(validate_disk_config(d.disk));
  return d;
}

}  // namespace

Result<DriveSpec> parse_drive(const nlohmann::json& j, const std::string& where) {
  ASSIGN_OR_RETURN(JsonReader r, JsonReader::open(j, where));
  DriveSpec d;
  ASSIGN_OR_RETURN(d.drive_id, r.required_string("drive_id"));
  if (d.drive_id.empty() || d.drive_id.size() > 64 ||
      d.drive_id.find_first_not_of(
          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") != std::string::npos)
    return fail(r.field("drive_id"), "must be 1..64 characters from [A-Za-z0-9_]");
  ASSIGN_OR_RETURN(auto root, r.optional_bool("is_root_device"));
  if (!root) return fail(r.field("is_root_device"), "missing required field");
  d.is_root_device = *root;
  ASSIGN_OR_RETURN(d.partuuid, r.optional_string("partuuid"));
  TRY(parse_drive_interface(r, d.disk));
  TRY(parse_drive_queues(r, d.disk));
  ASSIGN_OR_RETURN(auto socket, r.optional_string("socket"));
  if (socket) return parse_vhost_user_drive(r, std::move(d), std::move(*socket));
  ASSIGN_OR_RETURN(auto ro, r.optional_bool("is_read_only"));
  d.disk.read_only = ro.value_or(false);
  TRY(parse_drive_locking(r, d.disk));
  TRY(parse_drive_tuning(r, d.disk));
  TRY(reject_unsupported(r, "rate_limiter", "a drive rate limiter"));
  ASSIGN_OR_RETURN(auto path, r.optional_string("path_on_host"));
  if (!path) return fail(r.field("path_on_host"), "missing required field");
  // Absolute, as --disk path= (absolute_host_path): GET /vm/config and a snapshot name the image
  // whatever directory a later restore runs in.
  ASSIGN_OR_RETURN(d.disk.path, absolute_host_path(*path, r.field("path_on_host")));
  ASSIGN_OR_RETURN(auto cache, r.optional_string("cache_type"));
  d.cache_type = cache.value_or("Unsafe");
  if (d.cache_type == "Unsafe") {
    d.disk.cache = CacheMode::kUnsafe;
  } else if (d.cache_type == "Writeback") {
    d.disk.cache = CacheMode::kWriteback;
  } else {
    auto m = parse_cache_mode(d.cache_type);
    if (!m)
      return fail(r.field("cache_type"), "\"" + d.cache_type +
                                             "\": unknown cache type (Unsafe, Writeback, or tern's "
                                             "writeback, none, unsafe, directsync)");
    d.disk.cache = *m;
  }
  ASSIGN_OR_RETURN(auto engine, r.optional_string("io_engine"));
  d.io_engine = engine.value_or("Sync");
  if (d.io_engine == "Sync") {
    d.disk.engine = IoEngineKind::kThreads;
  } else if (d.io_engine == "Async") {
    d.disk.engine = IoEngineKind::kIoUring;
  } else {
    auto e = parse_io_engine(d.io_engine);
    if (!e)
      return fail(r.field("io_engine"), "\"" + d.io_engine +
                                            "\": unknown I/O engine (Sync, Async, or tern's "
                                            "threads, io_uring)");
    d.disk.engine = *e;
  }
  TRY(r.finish());
  TRY(check_readable_file(d.disk.path, r.field("path_on_host")));
  return d;
}

nlohmann::json to_json(const DriveSpec& d) {
  nlohmann::json j = {{"drive_id", d.drive_id}, {"is_root_device", d.is_root_device}};
  if (!d.disk.vhost_user_socket.empty()) {
    // Firecracker's vhost-user-block drive: the back-end's fields are omitted.
    j["socket"] = d.disk.vhost_user_socket;
  } else {
    j["cache_type"] = d.cache_type;
    j["is_read_only"] = d.disk.read_only;
    j["path_on_host"] = d.disk.path;
    j["io_engine"] = d.io_engine;
  }
  if (d.partuuid) j["partuuid"] = *d.partuuid;
  const DiskConfig defaults;
  // Only when not the default: a virtio drive renders as Firecracker's Drive.
  if (d.disk.interface != defaults.interface)
    j["interface"] = std::string(disk_interface_name(d.disk.interface));
  if (d.disk.queues != defaults.queues) j["queues"] = d.disk.queues;
  if (d.disk.queue_size != defaults.queue_size) j["queue_size"] = d.disk.queue_size;
  if (d.disk.locking != defaults.locking) j["locking"] = d.disk.locking;
  if (d.disk.format != defaults.format) j["format"] = std::string(disk_format_name(d.disk.format));
  if (d.disk.backing_files != defaults.backing_files) j["backing_files"] = d.disk.backing_files;
  if (d.disk.kick_suppress != defaults.kick_suppress) j["kick_suppress"] = d.disk.kick_suppress;
  if (d.disk.coalesce_us != defaults.coalesce_us) j["coalesce_us"] = d.disk.coalesce_us;
  if (d.disk.poll_us != defaults.poll_us) j["poll_us"] = d.disk.poll_us;
  return j;
}

}  // namespace tern
