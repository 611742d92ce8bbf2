// The device registry's table: every kind of device a VM configuration can name, what its spec
// is, and how the kind is built, saved in the snapshot's machine section and checked at restore.
//
// Adding a device kind (docs/devices.md): declare its Kind struct here and list it in
// DeviceKinds, implement it in src/vmm/devices/<kind>_kind.cc. Boot (boot_inputs.cc), restore
// (restore_inputs.cc), the machine section and the snapshot's host checks then know it through
// device_registry.h; only the user surface (CLI option, API route, config-file key) is per kind.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <variant>
#include <vector>

#include "base/result.h"
#include "block/disk_config.h"
#include "snapshot/codec.h"
#include "snapshot/snapshot_pair.h"
#include "virtio/rng/rng_config.h"

namespace tern {

class VirtioDevice;

/// A virtio-blk disk (--disk, PUT /drives): the image and how it is opened.
using DiskSpec = DiskConfig;
/// The virtio-rng entropy device (--rng, PUT /entropy): its rate limit.
using RngSpec = RngConfig;

// Every Kind has the same static members (device_registry.cc calls them through the table):
//   Spec                      the validated configuration value
//   kKind                     snapshot key and device-name prefix ("virtio-blk" → "virtio-blk0")
//   kLabel                    how restore errors name it ("snapshot disk 0")
//   make(spec, name)          creates the device (opens files; errors name the user's field)
//   encode / decode           the spec in the machine section (decode validates untrusted bytes)
//   save_facts / check_facts  host facts a restore must find unchanged (a disk: its image size)
//   protected_files           host files a snapshot must not overwrite (a disk: its image)
//   flush                     makes completed guest writes durable before a snapshot commits

/// virtio-blk (src/virtio/block): one per disk, in --disk / drive order.
struct DiskKind {
  using Spec = DiskSpec;
  static constexpr std::string_view kKind = "virtio-blk";
  static constexpr std::string_view kLabel = "disk";
  static Result<std::shared_ptr<VirtioDevice>> make(const Spec& s, const std::string& name);
  static void encode(snap::ByteWriter& w, const Spec& s);
  static Result<Spec> decode(snap::ByteReader& r);
  /// The image size in bytes (u64).
  static void save_facts(snap::ByteWriter& w, const Spec& s, const VirtioDevice& d);
  /// Refuses an image whose size changed since the save.
  static Result<void> check_facts(snap::ByteReader& r, const Spec& s, const VirtioDevice& d);
  static Result<std::vector<snap::ProtectedFile>> protected_files(const VirtioDevice& d,
                                                                  size_t index);
  static Result<void> flush(const VirtioDevice& d);
};

/// virtio-rng (src/virtio/rng): at most one, after the disks.
struct RngKind {
  using Spec = RngSpec;
  static constexpr std::string_view kKind = "virtio-rng";
  static constexpr std::string_view kLabel = "rng";
  static Result<std::shared_ptr<VirtioDevice>> make(const Spec& s, const std::string& name);
  static void encode(snap::ByteWriter& w, const Spec& s);
  static Result<Spec> decode(snap::ByteReader& r);
  static void save_facts(snap::ByteWriter&, const Spec&, const VirtioDevice&) {}
  static Result<void> check_facts(snap::ByteReader&, const Spec&, const VirtioDevice&) {
    return {};
  }
  static Result<std::vector<snap::ProtectedFile>> protected_files(const VirtioDevice&, size_t) {
    return std::vector<snap::ProtectedFile>{};
  }
  static Result<void> flush(const VirtioDevice&) { return {}; }
};

template <class... K>
struct KindList {
  using Tuple = std::tuple<K...>;
  using Spec = std::variant<typename K::Spec...>;
};

/// The table. The order is the PCI slot order of kinds: disks first (the first is slot 1,
/// /dev/vda), then the rng.
using DeviceKinds = KindList<DiskKind, RngKind>;

/// One device of a VM configuration; the alternative's index is its kind's index in DeviceKinds.
using DeviceSpec = DeviceKinds::Spec;

}  // namespace tern
