#include "vmm/config_file.h"

#include "api/api_parser.h"
#include "api/json_reader.h"
#include "base/fd.h"
#include "vmm/devices/device_surfaces.h"

#include <algorithm>

namespace tern {

Result<ConfigFile> parse_config_file(std::string_view text) {
  ASSIGN_OR_RETURN(nlohmann::json j, parse_json_text(text));
  ASSIGN_OR_RETURN(JsonReader r, JsonReader::open(j, ""));
  ConfigFile c;
  const nlohmann::json* boot = r.raw("boot-source");
  if (!boot) return fail("boot-source", "missing required section");
  ASSIGN_OR_RETURN(c.boot, parse_boot_source(*boot, "boot-source"));
  if (const nlohmann::json* m = r.raw("machine-config")) {
    ASSIGN_OR_RETURN(c.machine, parse_machine_config(*m, "machine-config"));
  }
  if (const nlohmann::json* drives = r.raw("drives")) {
    if (!drives->is_array()) return fail("drives", "expected an array, got " + json_type_name(*drives));
    for (size_t i = 0; i < drives->size(); ++i) {
      std::string where = "drives[" + std::to_string(i) + "]";
      ASSIGN_OR_RETURN(DriveSpec d, parse_drive((*drives)[i], where));
      for (const auto& other : c.drives) {
        if (other.drive_id == d.drive_id)
          return fail(where + ".drive_id", "\"" + d.drive_id + "\" is used twice");
        if (other.is_root_device && d.is_root_device)
          return fail(where + ".is_root_device", "drive \"" + other.drive_id + "\" is already the root device");
      }
      c.drives.push_back(std::move(d));
    }
  }
  for (const DeviceSurface& s : device_surfaces()) {
    std::string key(s.config_key);
    if (const nlohmann::json* e = r.raw(key)) {
      ASSIGN_OR_RETURN(DeviceSpec d, device_from_json(s, *e, key));
      put_device(c.devices, std::move(d));
    }
  }
  for (const KeyedSurface& s : keyed_surfaces()) {
    std::string key(s.config_key);
    const nlohmann::json* list = r.raw(key);
    if (!list) continue;
    if (!list->is_array()) return fail(key, "expected an array, got " + json_type_name(*list));
    for (size_t i = 0; i < list->size(); ++i) {
      std::string where = key + "[" + std::to_string(i) + "]";
      ASSIGN_OR_RETURN(DeviceSpec d, device_from_json(s, (*list)[i], where));
      if (has_device(c.devices, s.kind, *device_id(d)))
        return fail(where + "." + std::string(s.id_field), "\"" + *device_id(d) + "\" is used twice");
      put_device(c.devices, std::move(d));
    }
  }
  if (const nlohmann::json* k = r.raw("kernel-exits")) {
    ASSIGN_OR_RETURN(KernelExitsSetting s, parse_kernel_exits(*k, "kernel-exits"));
    c.kernel_exits = s.enabled;
  }
  // Sections tern does not support yet: accepted only when null or empty.
  for (std::string_view name : {"cpu-config", "balloon", "network-interfaces", "vsock", "logger",
                           "metrics", "mmds-config", "pmem", "memory-hotplug",
                           "serial"}) {
    if (std::ranges::any_of(device_surfaces(), [&](auto& s) { return s.config_key == name; }) ||
        std::ranges::any_of(keyed_surfaces(), [&](auto& s) { return s.config_key == name; }))
      continue;  // a device kind of this tern (parsed above)
    const nlohmann::json* v = r.raw(std::string(name));
    if (v && !(v->is_array() && v->empty()))
      return fail(std::string(name), "this Firecracker section is not supported by tern (use null or omit it)");
  }
  TRY(r.finish());
  return c;
}

VmResources ConfigFile::resources() const {
  VmResources r;
  r.boot = boot;
  r.set_machine_config(machine);
  r.drives = drives;
  r.devices = devices;
  r.kernel_exits = kernel_exits;
  return r;
}

Result<ConfigFile> read_config_file(const std::string& path) {
  auto text = read_file(path, 1 << 20);
  if (!text) return fail("--config-file", text.error().message());
  auto c = parse_config_file(*text);
  if (!c) return fail("--config-file " + path, c.error().message());
  return c;
}

}  // namespace tern
