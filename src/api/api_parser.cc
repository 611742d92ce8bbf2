#include "api/api_parser.h"

#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "api/api_parser_checks.h"
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

Result<void> check_readable_file(const std::string& path, const std::string& field) {
  if (path.empty()) return fail(field, "empty path");
  if (path.find('\0') != std::string::npos) return fail(field, "path contains a NUL byte");
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return fail_errno(field, path);
  if (S_ISDIR(st.st_mode)) return fail(field, path + ": is a directory");
  if (::access(path.c_str(), R_OK) != 0) return fail_errno(field, path);
  return {};
}

namespace {

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

}  // namespace

Result<void> reject_unsupported(JsonReader& r, const std::string& name, const std::string& what) {
  if (r.raw(name)) return fail(r.field(name), what + " is not supported by tern");
  return {};
}

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
