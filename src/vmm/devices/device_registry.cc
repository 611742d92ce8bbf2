#include "vmm/devices/device_registry.h"

#include <array>
#include <map>

#include <type_traits>

#include "base/printable.h"
#include "block/image_lock.h"
#include "devices/pci/pci_function_model.h"
#include "virtio/virtio_device.h"

namespace tern {

namespace {

using Kinds = DeviceKinds::Tuple;
constexpr size_t kNumKinds = std::tuple_size_v<Kinds>;

template <class Spec, class... K>
constexpr size_t kind_index(std::tuple<K...>*) {
  constexpr std::array<bool, sizeof...(K)> match = {std::is_same_v<Spec, typename K::Spec>...};
  for (size_t i = 0; i < match.size(); ++i)
    if (match[i]) return i;
  return sizeof...(K);
}

/// The Kind whose Spec is `Spec`.
template <class Spec>
using KindOf = std::tuple_element_t<kind_index<Spec>(static_cast<Kinds*>(nullptr)), Kinds>;

// The variant and the table list the kinds in the same order.
template <size_t... I>
constexpr bool same_order(std::index_sequence<I...>) {
  return (std::is_same_v<std::variant_alternative_t<I, DeviceSpec>,
                         typename std::tuple_element_t<I, Kinds>::Spec> &&
          ...);
}
static_assert(same_order(std::make_index_sequence<kNumKinds>()));

/// The type of device K::make() makes: VirtioDevice or PciFunctionModel.
template <class K>
using ProductOf = typename std::invoke_result_t<decltype(&K::make), const typename K::Spec&,
                                                const std::string&>::value_type::element_type;

/// The device `d` (made by K::make) as K's hooks take it.
template <class K>
const ProductOf<K>& product(const MadeDevice& d) {
  const auto* p = std::get_if<std::shared_ptr<ProductOf<K>>>(&d);
  TERN_CHECK(p != nullptr && *p != nullptr);  // the registry made it from the same spec
  return **p;
}

/// Calls f.template operator()<Kind>(spec) for the spec's kind.
template <class F>
decltype(auto) visit_kind(const DeviceSpec& spec, F&& f) {
  return std::visit(
      [&](const auto& s) -> decltype(auto) {
        using K = KindOf<std::decay_t<decltype(s)>>;
        return f.template operator()<K>(s);
      },
      spec);
}

/// Decodes a record of the kind named `kind`.
template <size_t I = 0>
Result<SavedDevice> decode_kind(std::string_view kind, snap::ByteReader& spec,
                                std::vector<uint8_t> facts, const std::string& what,
                                uint32_t version) {
  if constexpr (I == kNumKinds) {
    return fail(what, "device kind \"" + printable(kind) + "\" is unknown to this tern");
  } else {
    using K = std::tuple_element_t<I, Kinds>;
    if (kind != K::kKind) return decode_kind<I + 1>(kind, spec, std::move(facts), what, version);
    auto decoded = [&] {
      if constexpr (requires { K::decode(spec, version); })
        return K::decode(spec, version);  // its layout depends on the section version
      else
        return K::decode(spec);
    };
    ASSIGN_OR_RETURN(auto s, decoded());
    TRY(spec.expect_end());
    return SavedDevice{DeviceSpec(std::in_place_type<typename K::Spec>, std::move(s)),
                       std::move(facts)};
  }
}

}  // namespace

std::string_view device_kind(const DeviceSpec& spec) {
  return visit_kind(spec, []<class K>(const auto&) { return K::kKind; });
}

std::string device_name(const DeviceSpec& spec, size_t index) {
  return std::string(device_kind(spec)) + std::to_string(index);
}

Result<MadeDevice> make_device(const DeviceSpec& spec, size_t index) {
  std::string name = device_name(spec, index);
  return visit_kind(spec, [&]<class K>(const auto& s) -> Result<MadeDevice> {
    ASSIGN_OR_RETURN(auto d, K::make(s, name));
    return MadeDevice(std::move(d));
  });
}

Result<std::vector<MadeDevice>> make_devices(const std::vector<DeviceSpec>& specs) {
  std::vector<MadeDevice> out;
  std::array<size_t, kNumKinds> per_kind{};
  for (const DeviceSpec& s : specs) {
    ASSIGN_OR_RETURN(auto d, make_device(s, per_kind[s.index()]++));
    out.push_back(std::move(d));
  }
  return out;
}

SavedDevice save_device(const DeviceSpec& spec, const MadeDevice& device) {
  snap::ByteWriter w;
  visit_kind(spec, [&]<class K>(const auto& s) { K::save_facts(w, s, product<K>(device)); });
  return SavedDevice{spec, w.take()};
}

void encode_saved_device(snap::ByteWriter& w, const SavedDevice& d) {
  snap::ByteWriter spec;
  visit_kind(d.spec, [&]<class K>(const auto& s) { K::encode(spec, s); });
  w.string(device_kind(d.spec));
  w.blob(spec.data());
  w.blob(d.facts);
}

Result<SavedDevice> decode_saved_device(snap::ByteReader& r, uint32_t version) {
  ASSIGN_OR_RETURN(std::string kind, r.string(64));
  ASSIGN_OR_RETURN(auto spec_bytes, r.blob(64 * 1024));
  ASSIGN_OR_RETURN(auto facts, r.blob(4096));
  snap::ByteReader spec(spec_bytes, r.what() + ": " + kind);
  return decode_kind(kind, spec, std::move(facts), r.what(), version);
}

Result<SavedDevice> decode_v1_disk(snap::ByteReader& r, uint32_t i) {
  // Version 1 records are DiskKind's encoding followed by the image size.
  auto c = DiskKind::decode(r, 1);
  if (!c) return fail(r.what(), "disk " + std::to_string(i) + ": " + c.error().context);
  ASSIGN_OR_RETURN(uint64_t size, r.u64());
  snap::ByteWriter facts;
  facts.u64(size);
  return SavedDevice{DeviceSpec(std::in_place_type<DiskSpec>, std::move(*c)), facts.take()};
}

Result<std::vector<MadeDevice>> make_restored_devices(const std::vector<SavedDevice>& saved) {
  std::vector<MadeDevice> out;
  std::array<size_t, kNumKinds> per_kind{};
  for (const SavedDevice& d : saved) {
    size_t index = per_kind[d.spec.index()]++;
    TRY(visit_kind(d.spec, [&]<class K>(const auto& s) -> Result<void> {
      std::string label = "snapshot " + std::string(K::kLabel) + " " + std::to_string(index);
      auto dev = K::make(s, device_name(d.spec, index));
      if (!dev) return fail(label, restore_lock_hint(dev.error().message()));
      snap::ByteReader facts(d.facts, label);
      if (auto ok = K::check_facts(facts, s, **dev); !ok) return fail(label, ok.error().message());
      TRY(facts.expect_end());  // bytes the kind did not read: a corrupt record, not ignored
      out.push_back(MadeDevice(std::move(*dev)));
      return {};
    }));
  }
  return out;
}

Result<std::vector<snap::ProtectedFile>> device_protected_files(
    const std::vector<SavedDevice>& saved, const std::vector<MadeDevice>& devices) {
  std::vector<snap::ProtectedFile> out;
  std::array<size_t, kNumKinds> per_kind{};
  for (size_t i = 0; i < saved.size() && i < devices.size(); ++i) {
    size_t index = per_kind[saved[i].spec.index()]++;
    ASSIGN_OR_RETURN(auto files, visit_kind(saved[i].spec, [&]<class K>(const auto&) {
                       return K::protected_files(product<K>(devices[i]), index);
                     }));
    out.insert(out.end(), files.begin(), files.end());
  }
  return out;
}

Result<void> flush_devices(const std::vector<SavedDevice>& saved,
                           const std::vector<MadeDevice>& devices) {
  for (size_t i = 0; i < saved.size() && i < devices.size(); ++i)
    TRY(visit_kind(saved[i].spec,
                   [&]<class K>(const auto&) { return K::flush(product<K>(devices[i])); }));
  return {};
}

}  // namespace tern
