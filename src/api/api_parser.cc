#include "api/api_parser.h"

#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "api/json_reader.h"
#include "base/host_path.h"
#include "config/boot_source_check.h"
#include "config/device_surface.h"

namespace tern {

std::string json_text(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

ApiResponse ApiResponse::json(const nlohmann::json& body, int status) {
  return ApiResponse{status, "application/json", json_text(body)};
}

ApiResponse ApiResponse::text(std::string body, std::string content_type) {
  return ApiResponse{200, std::move(content_type), std::move(body)};
}

ApiResponse ApiResponse::error(int status, const std::string& fault_message) {
  // Messages may quote user bytes: json_text() never throws on them.
  return json({{"fault_message", fault_message}}, status);
}

namespace {

Result<void> check_readable_file(const std::string& path, const std::string& field) {
  if (path.empty()) return fail(field, "empty path");
  if (path.find('\0') != std::string::npos) return fail(field, "path contains a NUL byte");
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return fail_errno(field, path);
  if (S_ISDIR(st.st_mode)) return fail(field, path + ": is a directory");
  if (::access(path.c_str(), R_OK) != 0) return fail_errno(field, path);
  return {};
}

/// A path that may not exist yet: non-empty, no NUL, and not a directory when it exists.
Result<void> check_not_a_directory(const std::string& path, const std::string& field) {
  if (path.empty()) return fail(field, "empty path");
  if (path.find('\0') != std::string::npos) return fail(field, "path contains a NUL byte");
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    return fail(field, path + ": is a directory");
  return {};
}

// tern extension "memory_backend": "anon" | "memfd" | "hugetlbfs"; errors name the field.
Result<std::optional<MemoryBackend>> optional_memory_backend(JsonReader& r) {
  ASSIGN_OR_RETURN(auto name, r.optional_string("memory_backend"));
  if (!name) return std::optional<MemoryBackend>();
  auto b = parse_memory_backend(*name);
  if (!b)
    return fail(r.field("memory_backend"),
                "\"" + *name + "\": unknown backend (anon, memfd, hugetlbfs)");
  return std::optional<MemoryBackend>(*b);
}

// tern extension "cpu_affinity": {"vcpu": "0-1", "vcpu1": "1", "io": "0"} (--cpu-affinity's
// classes and Linux cpulists); errors name the field and the class.
Result<std::optional<CpuAffinity>> optional_cpu_affinity(JsonReader& r) {
  const nlohmann::json* j = r.raw("cpu_affinity");
  if (!j) return std::optional<CpuAffinity>();
  const std::string field = r.field("cpu_affinity");
  if (!j->is_object())
    return fail(field, "expected an object like {\"vcpu0\": \"0-1\", \"io\": \"0\"}, got " +
                           json_type_name(*j));
  CpuAffinity a;
  for (auto it = j->begin(); it != j->end(); ++it) {
    if (!it->is_string())
      return fail(field + " " + it.key(), "expected a CPU list string, got " + json_type_name(*it));
    TRY(add_cpu_affinity_entry(a, it.key(), it->get<std::string>(), field));
  }
  return std::optional<CpuAffinity>(std::move(a));
}

nlohmann::json cpu_affinity_json(const CpuAffinity& a) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [cls, cpus] : cpu_affinity_entries(a)) j[cls] = cpus;
  return j;
}

Result<void> reject_unsupported(JsonReader& r, const std::string& name, const std::string& what) {
  if (r.raw(name)) return fail(r.field(name), what + " is not supported by tern");
  return {};
}

}  // namespace

Result<BootSource> parse_boot_source(const nlohmann::json& j, const std::string& where) {
  ASSIGN_OR_RETURN(JsonReader r, JsonReader::open(j, where));
  BootSource b;
  ASSIGN_OR_RETURN(auto kernel, r.optional_string("kernel_image_path"));
  ASSIGN_OR_RETURN(b.initrd_path, r.optional_string("initrd_path"));
  ASSIGN_OR_RETURN(b.boot_args, r.optional_string("boot_args"));
  ASSIGN_OR_RETURN(auto protocol, r.optional_string("boot_protocol"));
  // tern extensions: firmware instead of a kernel (docs/firmware.md).
  ASSIGN_OR_RETURN(b.firmware_path, r.optional_string("firmware_path"));
  ASSIGN_OR_RETURN(b.firmware_vars_path, r.optional_string("firmware_vars_path"));
  ASSIGN_OR_RETURN(auto on_reboot, r.optional_string("on_reboot"));
  TRY(r.finish());
  if (kernel) {
    if (kernel->empty()) return fail(r.field("kernel_image_path"), "empty path");
    b.kernel_image_path = *kernel;
  } else if (!b.firmware_path) {
    return fail(r.field("kernel_image_path"), "missing required field");
  }
  if (protocol) {
    auto p = parse_boot_protocol(*protocol);
    if (!p)
      return fail(r.field("boot_protocol"),
                  "\"" + *protocol + "\" is not one of \"auto\", \"pvh\", \"bzimage\"");
    b.boot_protocol = *p;
  }
  if (on_reboot) {
    b.on_reboot = parse_on_reboot(*on_reboot);
    if (!b.on_reboot)
      return fail(r.field("on_reboot"), "\"" + *on_reboot + "\" is not one of \"exit\", \"restart\"");
  }
  TRY(check_boot_source(b, json_boot_source_names(where)));
  if (b.firmware_path) {
    TRY(check_readable_file(*b.firmware_path, r.field("firmware_path")));
    // The store may not exist yet (created from the template at boot, as --firmware-vars);
    // the boot checks it fully (VarsFile::open).
    if (b.firmware_vars_path)
      TRY(check_not_a_directory(*b.firmware_vars_path, r.field("firmware_vars_path")));
    return b;
  }
  TRY(check_readable_file(b.kernel_image_path, r.field("kernel_image_path")));
  if (b.initrd_path) TRY(check_readable_file(*b.initrd_path, r.field("initrd_path")));
  return b;
}

Result<KernelExitsSetting> parse_kernel_exits(const nlohmann::json& j, const std::string& where) {
  ASSIGN_OR_RETURN(JsonReader r, JsonReader::open(j, where));
  ASSIGN_OR_RETURN(std::optional<bool> enabled, r.optional_bool("enabled"));
  TRY(r.finish());
  if (!enabled) return fail(r.field("enabled"), "missing required field (true or false)");
  return KernelExitsSetting{*enabled};
}

Result<MachineConfigPatch> parse_machine_config_patch(const nlohmann::json& j,
                                                      const std::string& where) {
  ASSIGN_OR_RETURN(JsonReader r, JsonReader::open(j, where));
  MachineConfigPatch p;
  ASSIGN_OR_RETURN(auto vcpus, r.optional_uint("vcpu_count", 1, kMaxVcpus));
  if (vcpus) p.vcpu_count = static_cast<uint32_t>(*vcpus);
  // Up to 1 TiB; the host limit is checked at InstanceStart.
  ASSIGN_OR_RETURN(p.mem_size_mib, r.optional_uint("mem_size_mib", 1, uint64_t{1} << 20));
  ASSIGN_OR_RETURN(p.smt, r.optional_bool("smt"));
  ASSIGN_OR_RETURN(p.track_dirty_pages, r.optional_bool("track_dirty_pages"));
  ASSIGN_OR_RETURN(p.huge_pages, r.optional_string("huge_pages"));
  ASSIGN_OR_RETURN(p.memory_backend, optional_memory_backend(r));
  ASSIGN_OR_RETURN(p.cpu_affinity, optional_cpu_affinity(r));
  ASSIGN_OR_RETURN(auto tmpl, r.optional_string("cpu_template"));
  if (tmpl && *tmpl != "None")
    return fail(r.field("cpu_template"),
                "\"" + *tmpl + "\": CPU templates are not supported by tern");
  TRY(r.finish());
  return p;
}

Result<void> check_machine_config(const MachineConfig& m, const std::string& where) {
  auto f = [&](const char* n) { return where.empty() ? std::string(n) : where + "." + n; };
  if (m.smt) return fail(f("smt"), "true: SMT is not supported by tern");
  if (m.track_dirty_pages)
    return fail(f("track_dirty_pages"), "true: dirty page tracking is not supported by tern yet");
  if (m.huge_pages == "Transparent")
    return fail(f("huge_pages"), "\"Transparent\": not supported by tern (its default anonymous "
                                 "RAM asks for transparent huge pages already; \"2M\" is hugetlbfs)");
  if (m.huge_pages != "None" && m.huge_pages != "2M")
    return fail(f("huge_pages"),
                "\"" + m.huge_pages + "\": unknown value (None, Transparent, 2M)");
  if (m.huge_pages == "2M") {
    // "2M" is tern's hugetlbfs backend (Firecracker: mem_size_mib a multiple of 2).
    if (m.mem_size_mib % 2 != 0)
      return fail(f("huge_pages"), "\"2M\": mem_size_mib " + std::to_string(m.mem_size_mib) +
                                       " is not a multiple of 2 (2 MiB pages)");
    if (m.memory_backend && *m.memory_backend != MemoryBackend::kHugetlbfs)
      return fail(f("huge_pages"),
                  "\"2M\" is 2 MiB hugetlbfs RAM; memory_backend \"" +
                      std::string(memory_backend_name(*m.memory_backend)) + "\" contradicts it");
  }
  return {};
}

Result<MachineConfig> parse_machine_config(const nlohmann::json& j, const std::string& where) {
  ASSIGN_OR_RETURN(MachineConfigPatch p, parse_machine_config_patch(j, where));
  auto f = [&](const char* n) { return where.empty() ? std::string(n) : where + "." + n; };
  if (!p.vcpu_count) return fail(f("vcpu_count"), "missing required field");
  if (!p.mem_size_mib) return fail(f("mem_size_mib"), "missing required field");
  MachineConfig m;
  m.vcpu_count = *p.vcpu_count;
  m.mem_size_mib = *p.mem_size_mib;
  m.smt = p.smt.value_or(false);
  m.track_dirty_pages = p.track_dirty_pages.value_or(false);
  m.huge_pages = p.huge_pages.value_or("None");
  m.memory_backend = p.memory_backend;
  m.cpu_affinity = p.cpu_affinity.value_or(CpuAffinity{});
  TRY(check_machine_config(m, where));
  return m;
}

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

nlohmann::json to_json(const MachineConfig& m) {
  nlohmann::json j = {{"vcpu_count", m.vcpu_count},
                      {"mem_size_mib", m.mem_size_mib},
                      {"smt", m.smt},
                      {"track_dirty_pages", m.track_dirty_pages},
                      {"huge_pages", m.huge_pages}};
  if (m.memory_backend) j["memory_backend"] = std::string(memory_backend_name(*m.memory_backend));
  if (!m.cpu_affinity.empty()) j["cpu_affinity"] = cpu_affinity_json(m.cpu_affinity);
  return j;
}

nlohmann::json to_json(const BootSource& b) {
  nlohmann::json j = nlohmann::json::object();
  if (!b.kernel_image_path.empty() || !b.firmware_path)
    j["kernel_image_path"] = b.kernel_image_path;
  if (b.firmware_path) j["firmware_path"] = *b.firmware_path;
  if (b.firmware_vars_path) j["firmware_vars_path"] = *b.firmware_vars_path;
  if (b.initrd_path) j["initrd_path"] = *b.initrd_path;
  if (b.boot_args) j["boot_args"] = *b.boot_args;
  if (b.boot_protocol != BootProtocol::kAuto)
    j["boot_protocol"] = std::string(boot_protocol_name(b.boot_protocol));
  if (b.on_reboot) j["on_reboot"] = std::string(on_reboot_name(*b.on_reboot));
  return j;
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

namespace {

using Parsed = tl::expected<ApiRequest, ApiResponse>;

ApiResponse bad_request(const Error& e) {
  return ApiResponse::error(400, e.message());
}

Parsed invalid_path(std::string_view method, std::string_view path) {
  return tl::unexpected(ApiResponse::error(
      400, "Invalid request method and/or path: " + std::string(method) + " " + std::string(path)));
}

// Firecracker endpoints tern does not implement (yet): a clear 400 instead of "invalid path".
bool unsupported_firecracker_path(std::string_view p) {
  static const std::array<std::string_view, 8> exact = {"/balloon", "/cpu-config",    "/logger",
                                                        "/metrics", "/mmds",          "/serial",
                                                        "/vsock",   "/hotplug/memory"};
  static const std::array<std::string_view, 4> prefixes = {"/balloon/", "/mmds/", "/pmem/",
                                                           "/hotplug/"};
  for (auto e : exact)
    if (p == e) return true;
  for (auto pre : prefixes)
    if (p.starts_with(pre)) return true;
  return false;
}

Result<nlohmann::json> body_json(std::string_view body) {
  if (body.empty()) return fail("body", "missing: this request needs a JSON body");
  return parse_json_text(body);
}

template <class T, class F>
Parsed section(std::string_view body, F parse) {
  auto j = body_json(body);
  if (!j) return tl::unexpected(bad_request(j.error()));
  auto v = parse(*j, "");
  if (!v) return tl::unexpected(bad_request(v.error()));
  return T{std::move(*v)};
}

Parsed parse_action(std::string_view body) {
  auto j = body_json(body);
  if (!j) return tl::unexpected(bad_request(j.error()));
  auto r = JsonReader::open(*j, "");
  if (!r) return tl::unexpected(bad_request(r.error()));
  auto type = r->required_string("action_type");
  if (!type) return tl::unexpected(bad_request(type.error()));
  if (auto ok = r->finish(); !ok) return tl::unexpected(bad_request(ok.error()));
  if (*type == "InstanceStart") return api::InstanceStart{};
  if (*type == "SendCtrlAltDel") return api::SendCtrlAltDel{};
  if (*type == "FlushMetrics") return api::FlushMetrics{};
  return tl::unexpected(
      ApiResponse::error(400, "action_type: \"" + *type +
                                  "\": unknown action (InstanceStart, SendCtrlAltDel, "
                                  "FlushMetrics)"));
}

// The directory `path` would be created in exists and is writable (checked again when writing).
Result<void> check_writable_target(const std::string& path, const std::string& field) {
  TRY(check_not_a_directory(path, field));
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    return fail(field,
                path + ": exists and is not a regular file (tern only replaces regular files)");
  auto slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  if (::access(dir.c_str(), W_OK) != 0) return fail_errno(field, dir);
  return {};
}

Parsed parse_snapshot_create(std::string_view body) {
  auto run = [&]() -> Result<api::CreateSnapshot> {
    ASSIGN_OR_RETURN(auto j, body_json(body));
    ASSIGN_OR_RETURN(JsonReader r, JsonReader::open(j, ""));
    SnapshotCreateSpec s;
    ASSIGN_OR_RETURN(s.snapshot_path, r.required_string("snapshot_path"));
    ASSIGN_OR_RETURN(s.mem_file_path, r.required_string("mem_file_path"));
    ASSIGN_OR_RETURN(auto type, r.optional_string("snapshot_type"));
    if (type && *type != "Full")
      return fail("snapshot_type", "\"" + *type + "\": " +
                                       (*type == "Diff" ? "diff snapshots are not supported by tern"
                                                        : "unknown type (Full)"));
    ASSIGN_OR_RETURN(auto rate, r.optional_uint("rate_limit_bytes_per_s", 0, uint64_t{1} << 50));
    s.rate_limit_bytes_per_s = rate.value_or(0);
    ASSIGN_OR_RETURN(auto direct, r.optional_bool("direct"));
    s.direct = direct.value_or(false);
    (void)r.raw("version");  // deprecated in Firecracker; ignored
    TRY(r.finish());
    // Same file under another spelling or a hard link, and the VM's own files: Vm::save_snapshot.
    if (s.snapshot_path == s.mem_file_path)
      return fail("mem_file_path", "must differ from snapshot_path");
    TRY(check_writable_target(s.snapshot_path, "snapshot_path"));
    TRY(check_writable_target(s.mem_file_path, "mem_file_path"));
    return api::CreateSnapshot{std::move(s)};
  };
  auto r = run();
  if (!r) return tl::unexpected(bad_request(r.error()));
  return *r;
}

Parsed parse_snapshot_load(std::string_view body) {
  auto run = [&]() -> Result<api::LoadSnapshot> {
    ASSIGN_OR_RETURN(auto j, body_json(body));
    ASSIGN_OR_RETURN(JsonReader r, JsonReader::open(j, ""));
    SnapshotLoadSpec s;
    ASSIGN_OR_RETURN(s.snapshot_path, r.required_string("snapshot_path"));
    ASSIGN_OR_RETURN(auto old_mem, r.optional_string("mem_file_path"));
    const nlohmann::json* backend = r.raw("mem_backend");
    if (backend && old_mem)
      return fail("mem_backend", "give either mem_backend or mem_file_path, not both");
    if (backend) {
      ASSIGN_OR_RETURN(JsonReader b, JsonReader::open(*backend, "mem_backend"));
      ASSIGN_OR_RETURN(auto type, b.required_string("backend_type"));
      if (type != "File")
        return fail(
            b.field("backend_type"),
            "\"" + type + "\": " +
                (type == "Uffd" ? "userfaultfd backends are not supported by tern (tern maps "
                                  "the file copy-on-write)"
                                : "unknown type (File)"));
      ASSIGN_OR_RETURN(s.mem_file_path, b.required_string("backend_path"));
      TRY(b.finish());
    } else if (old_mem) {
      s.mem_file_path = *old_mem;
    } else {
      return fail("mem_backend", "missing: give mem_backend {backend_type: File, backend_path}");
    }
    ASSIGN_OR_RETURN(auto resume, r.optional_bool("resume_vm"));
    s.resume_vm = resume.value_or(false);
    ASSIGN_OR_RETURN(s.memory_backend, optional_memory_backend(r));
    ASSIGN_OR_RETURN(auto on_reboot, r.optional_string("on_reboot"));
    if (on_reboot) {
      s.on_reboot = parse_on_reboot(*on_reboot);
      if (!s.on_reboot)
        return fail(r.field("on_reboot"),
                    "\"" + *on_reboot + "\" is not one of \"exit\", \"restart\"");
    }
    ASSIGN_OR_RETURN(auto affinity, optional_cpu_affinity(r));
    s.cpu_affinity = affinity.value_or(CpuAffinity{});
    for (const char* f : {"enable_diff_snapshots", "track_dirty_pages", "clock_realtime"}) {
      ASSIGN_OR_RETURN(auto v, r.optional_bool(f));
      if (v && *v) return fail(f, "true is not supported by tern");
    }
    if (const auto* n = r.raw("network_overrides"); n && !(n->is_array() && n->empty()))
      return fail("network_overrides",
                  "not supported by tern (a restore reopens the taps by the names saved)");
    if (r.raw("vsock_override")) return fail("vsock_override", "tern VMs have no vsock device");
    TRY(r.finish());
    TRY(check_readable_file(s.snapshot_path, "snapshot_path"));
    TRY(check_readable_file(s.mem_file_path,
                            backend ? "mem_backend.backend_path" : "mem_file_path"));
    return api::LoadSnapshot{std::move(s)};
  };
  auto r = run();
  if (!r) return tl::unexpected(bad_request(r.error()));
  return *r;
}

// PUT or PATCH <api_path>/{id}: the body's id field must be the path's.
Parsed parse_keyed_device(const KeyedSurface& s, const std::string& id, bool put,
                          std::string_view body) {
  auto j = body_json(body);
  if (!j) return tl::unexpected(bad_request(j.error()));
  std::string body_id;
  ApiRequest request;
  if (put) {
    auto spec = s.from_json(*j, "");
    if (!spec) return tl::unexpected(bad_request(spec.error()));
    body_id = s.id_of(*spec);
    request = api::PutKeyedDevice{std::string(s.api_path), s.kind, id, std::move(*spec)};
  } else {
    if (auto ok = s.check_patch(*j, ""); !ok) return tl::unexpected(bad_request(ok.error()));
    auto f = j->find(std::string(s.id_field));  // check_patch read it as a required string
    if (f == j->end() || !f->is_string())
      return tl::unexpected(
          ApiResponse::error(400, std::string(s.id_field) + ": missing required field"));
    body_id = f->get<std::string>();
    request = api::PatchKeyedDevice{std::string(s.api_path), s.kind, id};
  }
  if (body_id != id)
    return tl::unexpected(ApiResponse::error(400, std::string(s.id_field) + ": \"" + body_id +
                                                      "\" does not match the id in the path (\"" +
                                                      id + "\")"));
  return request;
}

Parsed parse_vm_state(std::string_view body) {
  auto j = body_json(body);
  if (!j) return tl::unexpected(bad_request(j.error()));
  auto r = JsonReader::open(*j, "");
  if (!r) return tl::unexpected(bad_request(r.error()));
  auto state = r->required_string("state");
  if (!state) return tl::unexpected(bad_request(state.error()));
  if (auto ok = r->finish(); !ok) return tl::unexpected(bad_request(ok.error()));
  if (*state == "Paused") return api::PauseVm{};
  if (*state == "Resumed") return api::ResumeVm{};
  return tl::unexpected(
      ApiResponse::error(400, "state: \"" + *state + "\": unknown state (Paused, Resumed)"));
}

}  // namespace

tl::expected<ApiRequest, ApiResponse> parse_api_request(std::string_view method,
                                                        std::string_view target,
                                                        std::string_view body) {
  if (target.empty() || target[0] != '/')
    return tl::unexpected(ApiResponse::error(
        400, "request target \"" + std::string(target.substr(0, 200)) + "\" must start with '/'"));
  std::string_view path = target.substr(0, target.find('?'));
  if (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  const bool get = method == "GET", put = method == "PUT", patch = method == "PATCH";

  if (path == "/" && get) return api::GetInstanceInfo{};
  if (path == "/version" && get) return api::GetVersion{};
  if (path == "/boot-source" && put) return section<api::PutBootSource>(body, parse_boot_source);
  if (path == "/machine-config") {
    if (get) return api::GetMachineConfig{};
    if (put) return section<api::PutMachineConfig>(body, parse_machine_config);
    if (patch) return section<api::PatchMachineConfig>(body, parse_machine_config_patch);
  }
  if (path.starts_with("/drives/")) {
    std::string id(path.substr(8));
    if (patch)
      return tl::unexpected(ApiResponse::error(
          400, "PATCH /drives/" + id + ": updating a drive after boot is not supported by tern"));
    if (put) {
      auto drive = section<api::PutDrive>(body, parse_drive);
      if (drive && std::get<api::PutDrive>(*drive).value.drive_id != id)
        return tl::unexpected(ApiResponse::error(
            400, "drive_id: \"" + std::get<api::PutDrive>(*drive).value.drive_id +
                     "\" does not match the id in the path (\"" + id + "\")"));
      return drive;
    }
  }
  if (put) {
    if (const DeviceSurface* device = device_surface_for_path(path)) {
      auto j = body_json(body);
      if (!j) return tl::unexpected(bad_request(j.error()));
      auto spec = device->from_json(*j, "");
      if (!spec) return tl::unexpected(bad_request(spec.error()));
      return api::PutDevice{std::string(device->api_path), device->kind, std::move(*spec)};
    }
  }
  std::string id;
  if (const KeyedSurface* keyed = keyed_surface_for_path(path, id); keyed && (put || patch)) {
    return parse_keyed_device(*keyed, id, put, body);
  }
  if (path == "/actions" && put) return parse_action(body);
  if (path == "/vm" && patch) return parse_vm_state(body);
  if (path == "/vm/config" && get) return api::GetVmConfig{};
  if (path == "/tern/stats" && get) return api::GetStats{};
  if (path == "/tern/metrics" && get) return api::GetMetrics{};
  if (path == "/tern/events" && get) return api::GetEvents{};
  if (path == "/tern/power-off" && put) return api::PowerOff{};
  if (path == "/tern/kernel-exits" && put)
    return section<api::PutKernelExits>(body, parse_kernel_exits);
  if (path == "/snapshot/create" && put) return parse_snapshot_create(body);
  if (path == "/snapshot/load" && put) return parse_snapshot_load(body);
  if (unsupported_firecracker_path(path))
    return tl::unexpected(
        ApiResponse::error(400, std::string(method) + " " + std::string(path) +
                                    ": this Firecracker endpoint is not supported by tern"));
  return invalid_path(method, path);
}

}  // namespace tern
