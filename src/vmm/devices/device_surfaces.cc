#include "vmm/devices/device_surfaces.h"

#include <array>
#include <string>
#include <utility>
#include <vector>

namespace tern {

namespace {

using Kinds = DeviceKinds::Tuple;
constexpr size_t kNumKinds = std::tuple_size_v<Kinds>;

template <class K>
concept IsKeyed = requires { K::kIdField; };
template <class K>
concept HasSurface = requires { K::kConfigKey; } && !IsKeyed<K>;
template <class K>
concept RendersJson = requires { K::kConfigKey; };

template <class K>
Result<std::any> from_json_any(const nlohmann::json& j, const std::string& where) {
  ASSIGN_OR_RETURN(auto spec, K::from_json(j, where));
  return std::any(std::move(spec));
}

template <class K>
std::string id_of_any(const std::any& v) {
  return std::string(K::id(std::any_cast<const typename K::Spec&>(v)));
}

template <size_t... I>
std::vector<KeyedSurface> make_keyed_table(std::index_sequence<I...>) {
  std::vector<KeyedSurface> out;
  auto add = [&]<size_t N>(std::integral_constant<size_t, N>) {
    using K = std::tuple_element_t<N, Kinds>;
    if constexpr (IsKeyed<K>)
      out.push_back(KeyedSurface{N, K::kConfigKey, K::kApiPath, K::kIdField, K::kCliOption,
                                 K::kCliHelp, &from_json_any<K>, &id_of_any<K>,
                                 &K::from_patch_json});
  };
  (add(std::integral_constant<size_t, I>()), ...);
  return out;
}

const std::vector<KeyedSurface>& keyed_table() {
  static const std::vector<KeyedSurface> t =
      make_keyed_table(std::make_index_sequence<kNumKinds>());
  return t;
}

template <size_t... I>
std::vector<DeviceSurface> make_table(std::index_sequence<I...>) {
  std::vector<DeviceSurface> out;
  auto add = [&]<size_t N>(std::integral_constant<size_t, N>) {
    using K = std::tuple_element_t<N, Kinds>;
    if constexpr (HasSurface<K>)
      out.push_back(DeviceSurface{N, K::kConfigKey, K::kApiPath, K::kCliOption, K::kCliHelp,
                                  &from_json_any<K>});
  };
  (add(std::integral_constant<size_t, I>()), ...);
  return out;
}

const std::vector<DeviceSurface>& table() {
  static const std::vector<DeviceSurface> t = make_table(std::make_index_sequence<kNumKinds>());
  return t;
}

/// Calls f.template operator()<N>() for the kind index `kind`.
template <size_t N = 0, class F>
auto with_kind(size_t kind, F&& f) -> decltype(f.template operator()<0>()) {
  if constexpr (N + 1 == kNumKinds) {
    return f.template operator()<N>();
  } else {
    if (kind == N) return f.template operator()<N>();
    return with_kind<N + 1>(kind, std::forward<F>(f));
  }
}

}  // namespace

std::span<const DeviceSurface> device_surfaces() { return table(); }

const DeviceSurface* device_surface_for_path(std::string_view path) {
  for (const DeviceSurface& s : table())
    if (s.api_path == path) return &s;
  return nullptr;
}

const DeviceSurface* device_surface_of(const DeviceSpec& spec) {
  for (const DeviceSurface& s : table())
    if (s.kind == spec.index()) return &s;
  return nullptr;
}

std::span<const KeyedSurface> keyed_surfaces() { return keyed_table(); }

const KeyedSurface* keyed_surface_for_path(std::string_view path, std::string& id) {
  for (const KeyedSurface& s : keyed_table()) {
    if (path.size() <= s.api_path.size() + 1 || !path.starts_with(s.api_path) ||
        path[s.api_path.size()] != '/')
      continue;
    std::string_view rest = path.substr(s.api_path.size() + 1);
    if (rest.find('/') != std::string_view::npos) continue;
    id = std::string(rest);
    return &s;
  }
  return nullptr;
}

const KeyedSurface* keyed_surface_of(const DeviceSpec& spec) {
  for (const KeyedSurface& s : keyed_table())
    if (s.kind == spec.index()) return &s;
  return nullptr;
}

std::optional<std::string> device_id(const DeviceSpec& spec) {
  return with_kind(spec.index(), [&]<size_t N>() -> std::optional<std::string> {
    using K = std::tuple_element_t<N, Kinds>;
    if constexpr (IsKeyed<K>)
      return std::string(K::id(std::get<N>(spec)));
    else
      return std::nullopt;
  });
}

void put_device(std::vector<DeviceSpec>& devices, DeviceSpec spec) {
  const size_t kind = spec.index();
  const std::optional<std::string> id = device_id(spec);
  auto it = devices.begin();
  while (it != devices.end() && it->index() < kind) ++it;
  // Devices of this kind: the one to replace (same id, or the single-instance one), else append.
  for (; it != devices.end() && it->index() == kind; ++it) {
    if (!id || device_id(*it) == id) {
      *it = std::move(spec);
      return;
    }
  }
  devices.insert(it, std::move(spec));
}

bool has_device(const std::vector<DeviceSpec>& devices, size_t kind, std::string_view id) {
  for (const DeviceSpec& d : devices)
    if (d.index() == kind && device_id(d) == id) return true;
  return false;
}

Result<void> check_pci_slots(size_t disks, const std::vector<DeviceSpec>& devices, bool cli) {
  const size_t total = disks + devices.size();
  if (total <= kMaxPciDevices) return {};
  std::string field = cli ? "--disk" : "drives";
  if (disks < kMaxPciDevices) {
    const DeviceSpec& first = devices[kMaxPciDevices - disks];  // the first without a slot
    size_t of_kind = 0;  // its index among the devices of its kind
    for (const DeviceSpec* d = devices.data(); d != &first; ++d) of_kind += d->index() == first.index();
    field = with_kind(first.index(), [&]<size_t N>() -> std::string {
      using K = std::tuple_element_t<N, Kinds>;
      if constexpr (RendersJson<K>) {
        if (cli) return std::string(K::kCliOption);
        if constexpr (IsKeyed<K>) return std::string(K::kConfigKey) + "[" + std::to_string(of_kind) + "]";
        return std::string(K::kConfigKey);
      } else {
        return cli ? "--disk" : "drives";
      }
    });
  }
  return fail(field, std::to_string(total) + " PCI devices (" + std::to_string(disks) +
                         " disks, " + std::to_string(devices.size()) +
                         " others): a VM has " + std::to_string(kMaxPciDevices) +
                         " PCI slots (bus 0, slots 1-31)");
}

Result<void> check_devices_for_vm(const std::vector<DeviceSpec>& devices, uint32_t vcpus,
                                  bool cli) {
  std::array<size_t, kNumKinds> seen{};
  for (const DeviceSpec& d : devices) {
    size_t i = seen[d.index()]++;
    auto ok = with_kind(d.index(), [&]<size_t N>() -> Result<void> {
      using K = std::tuple_element_t<N, Kinds>;
      if constexpr (IsKeyed<K>) {
        auto r = K::check_for_vm(std::get<N>(d), vcpus);
        // The devices of this kind before it (devices is in kind order).
        for (const DeviceSpec* e = devices.data(); r && e != &d; ++e)
          if (e->index() == N) r = K::check_against(std::get<N>(d), std::get<N>(*e));
        if (r) return {};
        Error e = r.error();
        e.op = cli ? std::string(K::kCliOption) + " " + K::cli_key(e.op)
                   : std::string(K::kConfigKey) + "[" + std::to_string(i) + "]." + e.op;
        return tl::unexpected(std::move(e));
      } else {
        return {};
      }
    });
    TRY(ok);
  }
  // Two NVMe controllers with one serial have one subsystem NQN (nvme_identify.cc): Linux binds
  // the second into the first's subsystem and refuses its namespace ("duplicate IDs"). A disk
  // without a serial reports "tern-nvme<i>" (i: its index among the NVMe disks).
  std::vector<std::pair<std::string, const DiskConfig*>> serials;
  for (const DeviceSpec& d : devices) {
    const auto* n = std::get_if<NvmeSpec>(&d);
    if (!n) continue;
    std::string sn = n->disk.serial.empty() ? "tern-nvme" + std::to_string(serials.size())
                                            : n->disk.serial;
    while (!sn.empty() && sn.back() == ' ') sn.pop_back();  // SN is space padded
    for (const auto& [other, disk] : serials)
      if (other == sn)
        return fail(cli ? "--disk serial" : "drives.serial",
                    "NVMe disks " + disk->path + " and " + n->disk.path + " both report serial \"" +
                        sn + "\" (each NVMe disk needs its own: Linux refuses a second "
                        "controller of one subsystem NQN)");
    serials.emplace_back(std::move(sn), &n->disk);
  }
  return {};
}

Result<DeviceSpec> device_spec_of(size_t kind, const std::any& value) {
  return with_kind(kind, [&]<size_t N>() -> Result<DeviceSpec> {
    using Spec = typename std::tuple_element_t<N, Kinds>::Spec;
    const Spec* s = std::any_cast<Spec>(&value);
    if (!s) return fail("device", "the value is not a spec of kind " + std::to_string(kind));
    return DeviceSpec(std::in_place_index<N>, *s);
  });
}

Result<DeviceSpec> device_from_json(const DeviceSurface& s, const nlohmann::json& j,
                                    const std::string& where) {
  ASSIGN_OR_RETURN(std::any v, s.from_json(j, where));
  return device_spec_of(s.kind, v);
}

Result<DeviceSpec> device_from_cli(const DeviceSurface& s, std::string_view spec) {
  return with_kind(s.kind, [&]<size_t N>() -> Result<DeviceSpec> {
    using K = std::tuple_element_t<N, Kinds>;
    if constexpr (HasSurface<K>) {
      ASSIGN_OR_RETURN(auto v, K::from_cli(spec));
      return DeviceSpec(std::in_place_index<N>, std::move(v));
    } else {
      return fail(std::string(s.cli_option), "this device kind has no command-line option");
    }
  });
}

Result<DeviceSpec> device_from_json(const KeyedSurface& s, const nlohmann::json& j,
                                    const std::string& where) {
  ASSIGN_OR_RETURN(std::any v, s.from_json(j, where));
  return device_spec_of(s.kind, v);
}

Result<DeviceSpec> device_from_cli(const KeyedSurface& s, std::string_view spec, size_t index) {
  return with_kind(s.kind, [&]<size_t N>() -> Result<DeviceSpec> {
    using K = std::tuple_element_t<N, Kinds>;
    if constexpr (IsKeyed<K>) {
      ASSIGN_OR_RETURN(auto v, K::from_cli(spec, std::string(K::kCliIdPrefix) +
                                                     std::to_string(index)));
      return DeviceSpec(std::in_place_index<N>, std::move(v));
    } else {
      return fail(std::string(s.cli_option), "this device kind has no repeatable option");
    }
  });
}

nlohmann::json device_to_json(const DeviceSpec& spec) {
  return with_kind(spec.index(), [&]<size_t N>() -> nlohmann::json {
    using K = std::tuple_element_t<N, Kinds>;
    if constexpr (RendersJson<K>)
      return K::to_json(std::get<N>(spec));
    else
      return nullptr;
  });
}

}  // namespace tern
