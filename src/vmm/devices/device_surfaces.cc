#include "vmm/devices/device_surfaces.h"

#include <array>
#include <vector>

namespace tern {

namespace {

using Kinds = DeviceKinds::Tuple;
constexpr size_t kNumKinds = std::tuple_size_v<Kinds>;

template <class K>
concept HasSurface = requires { K::kConfigKey; };

template <class K>
Result<std::any> from_json_any(const nlohmann::json& j, const std::string& where) {
  ASSIGN_OR_RETURN(auto spec, K::from_json(j, where));
  return std::any(std::move(spec));
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

void put_device(std::vector<DeviceSpec>& devices, DeviceSpec spec) {
  auto it = devices.begin();
  while (it != devices.end() && it->index() < spec.index()) ++it;
  if (it != devices.end() && it->index() == spec.index())
    *it = std::move(spec);
  else
    devices.insert(it, std::move(spec));
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

nlohmann::json device_to_json(const DeviceSpec& spec) {
  return with_kind(spec.index(), [&]<size_t N>() -> nlohmann::json {
    using K = std::tuple_element_t<N, Kinds>;
    if constexpr (HasSurface<K>)
      return K::to_json(std::get<N>(spec));
    else
      return nullptr;
  });
}

}  // namespace tern
