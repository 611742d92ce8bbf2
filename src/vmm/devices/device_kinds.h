// The device registry's table: every kind of device a VM configuration can name, what its spec
// is, and how the kind is built, saved in the snapshot's machine section and checked at restore.
//
// Adding a device kind (docs/devices.md): declare its Kind struct here and list it in
// DeviceKinds, implement it in src/vmm/devices/<kind>_kind.cc. Boot (boot_inputs.cc), restore
// (restore_inputs.cc), the machine section and the snapshot's host checks then know it through
// device_registry.h; a single-instance or keyed list kind's user surface (CLI option, API route,
// config-file key, GET /vm/config) through its surface members and device_surfaces.h.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <tuple>
#include <variant>
#include <vector>

#include "base/result.h"
#include "block/disk_config.h"
#include "snapshot/codec.h"
#include "snapshot/snapshot_pair.h"
#include "virtio/net/net_config.h"
#include "virtio/rng/rng_config.h"

namespace tern {

class VirtioDevice;
class PciFunctionModel;

/// A virtio-blk disk (--disk, PUT /drives): the image and how it is opened, or the vhost-user
/// back-end's socket (vhost_user_socket).
using DiskSpec = DiskConfig;
/// An emulated NVMe disk (--disk path=IMG,interface=nvme; a drive with "interface": "nvme"): the
/// image and how it is opened (disk.interface is kNvme; queues/queue_size at their defaults).
/// A distinct type so that the DeviceSpec variant tells it from a virtio-blk disk.
struct NvmeSpec {
  DiskConfig disk;
};
/// The virtio-rng entropy device (--rng, PUT /entropy): its rate limit.
using RngSpec = RngConfig;
/// A virtio-net interface (--net, PUT /network-interfaces/{iface_id}): its tap, MAC, queues.
using NetSpec = NetConfig;

// Every Kind has the same static members (device_registry.cc calls them through the table):
//   Spec                      the validated configuration value
//   kKind                     snapshot key and device-name prefix ("virtio-blk" → "virtio-blk0")
//   kLabel                    how restore errors name it ("snapshot disk 0")
//   make(spec, name)          creates the device (opens files; errors name the user's field):
//                             a std::shared_ptr<VirtioDevice> or <PciFunctionModel> (MadeDevice,
//                             made_device.h); the hooks below take the device as that type
//   encode / decode           the spec in the machine section (decode validates untrusted bytes;
//                             a kind whose spec grew a field also takes the section's version)
//   save_facts / check_facts  host facts a restore must find unchanged (a disk: its image size)
//   protected_files           host files a snapshot must not overwrite (a disk: its image)
//   flush                     makes completed guest writes durable before a snapshot commits
// A single-instance kind (at most one per VM) also has a user surface (device_surfaces.h):
//   kConfigKey                config-file and GET /vm/config key ("entropy")
//   kApiPath                  its pre-boot PUT path ("/entropy"); errors name "PUT <path>"
//   kCliOption, kCliHelp      its `tern run` option, `--opt` or `--opt=SPEC`
//   from_json(j, where)       parses and validates a JSON body; errors name fields under where
//   to_json(spec)             renders the spec as from_json reads it (GET /vm/config)
//   from_cli(spec)            parses the option's SPEC ("" when given alone); errors name it
// A keyed list kind (several per VM, each named by an id; network interfaces) has a keyed
// surface (device_surfaces.h) instead: the same members with these meanings, plus:
//   kIdField                  the id's JSON field ("iface_id"); PUT/PATCH <kApiPath>/{id}
//   kCliIdPrefix              ids of the CLI's devices: prefix + index ("net0", "net1", ...)
//   id(spec)                  the spec's id
//   from_cli(spec, id)        parses one value of the (repeatable) option into device `id`
//   from_patch_json(j, where) checks a PATCH body (the fields tern can update: none yet)
//   check_for_vm(spec, vcpus) checks against the VM (queues ≤ vCPUs); errors name the field
//                             relative to the device ("queues"), the caller prefixes it
//   check_against(spec, other) checks against another device of its kind configured before it
//                             (not the same tap); errors as check_for_vm's
//   cli_key(field)            the option's key for a JSON field check_* names ("tap")
// Disks are configured as drives (drive_id, root device) and have no such members.

/// virtio-blk: one per disk, in --disk / drive order. A disk tern serves (VirtioBlock,
/// src/virtio/block) or, with a vhost_user_socket, a vhost-user-blk front-end (VhostUserBlk,
/// src/vhost_user/frontend) whose image is the back-end's: no size fact, no protected file,
/// nothing to flush.
/// A disk's format and backing_files flag as machine section v6 records them (virtio-blk and
/// NVMe specs end with them): a u8 DiskFormat, a bool. decode refuses an unknown format.
void encode_disk_format(snap::ByteWriter& w, const DiskConfig& c);
[[nodiscard]] Result<void> decode_disk_format(snap::ByteReader& r, DiskConfig& c);

struct DiskKind {
  using Spec = DiskSpec;
  static constexpr std::string_view kKind = "virtio-blk";
  static constexpr std::string_view kLabel = "disk";
  /// VirtioBlock::create(), or make_vhost_user_blk() (connects to the back-end now) whose
  /// errors become "--disk vhost-user=PATH: ...".
  static Result<std::shared_ptr<VirtioDevice>> make(const Spec& s, const std::string& name);
  /// The current machine section version's layout (5: the vhost-user socket, locking, then
  /// kick_suppress, coalesce_us, poll_us).
  static void encode(snap::ByteWriter& w, const Spec& s);
  /// Reads machine section `version`'s layout (1 and 2: no socket; 3: the socket last; 4: then
  /// the locking flag; before 4, locking is on; 5: then the notification tuning, before 5 off).
  static Result<Spec> decode(snap::ByteReader& r, uint32_t version);
  /// The image size in bytes (u64); nothing for a vhost-user disk.
  static void save_facts(snap::ByteWriter& w, const Spec& s, const VirtioDevice& d);
  /// Refuses an image whose size changed since the save.
  static Result<void> check_facts(snap::ByteReader& r, const Spec& s, const VirtioDevice& d);
  /// The image; none for a vhost-user disk.
  static Result<std::vector<snap::ProtectedFile>> protected_files(const VirtioDevice& d,
                                                                  size_t index);
  /// fdatasync of the image; nothing for a vhost-user disk (the back-end's business).
  static Result<void> flush(const VirtioDevice& d);
};

/// NVMe (src/nvme, docs/nvme.md): one controller with one namespace per NVMe disk, named nvme0,
/// nvme1, ... (index among the NVMe disks). Listed after DiskKind; the drives keep their order
/// across interfaces (a drive list's order is the PCI slot order, whichever kinds they are).
/// The image is tern's: its size is a fact, the file is protected and flushed like a VirtioBlock's.
struct NvmeKind {
  using Spec = NvmeSpec;
  static constexpr std::string_view kKind = "nvme";
  static constexpr std::string_view kLabel = "nvme disk";
  /// nvme::NvmeDisk::create(): validates and opens the image (errors name the --disk field).
  static Result<std::shared_ptr<PciFunctionModel>> make(const Spec& s, const std::string& name);
  /// path, cache, read-only, serial, engine, locking (queues and queue_size are virtio's).
  static void encode(snap::ByteWriter& w, const Spec& s);
  /// Reads machine section `version`'s layout (3: no locking flag, locking on); validates with
  /// validate_disk_config() (interface nvme).
  static Result<Spec> decode(snap::ByteReader& r, uint32_t version);
  /// The image size in bytes (u64).
  static void save_facts(snap::ByteWriter& w, const Spec& s, const PciFunctionModel& d);
  /// Refuses an image whose size changed since the save.
  static Result<void> check_facts(snap::ByteReader& r, const Spec& s, const PciFunctionModel& d);
  /// The image.
  static Result<std::vector<snap::ProtectedFile>> protected_files(const PciFunctionModel& d,
                                                                  size_t index);
  /// fdatasync of the image (DiskImage::flush).
  static Result<void> flush(const PciFunctionModel& d);
};

/// virtio-rng (src/virtio/rng): at most one, after the disks.
struct RngKind {
  using Spec = RngSpec;
  static constexpr std::string_view kKind = "virtio-rng";
  static constexpr std::string_view kLabel = "rng";
  static Result<std::shared_ptr<VirtioDevice>> make(const Spec& s, const std::string& name);
  static void encode(snap::ByteWriter& w, const Spec& s);
  static Result<Spec> decode(snap::ByteReader& r);
  static constexpr std::string_view kConfigKey = "entropy";
  static constexpr std::string_view kApiPath = "/entropy";
  static constexpr std::string_view kCliOption = "--rng";
  static constexpr std::string_view kCliHelp =
      "virtio-rng entropy device (the guest's /dev/hwrng); alone: no rate limit. SPEC: "
      "[bandwidth=SIZE][,ops=N][,refill_time=MS][,one_time_burst=SIZE] (Firecracker's "
      "rate_limiter; SIZE in bytes or with K/M/G; refill_time default 1000)";
  /// Firecracker's EntropyDevice body: {"rate_limiter": {"bandwidth": {size, one_time_burst,
  /// refill_time}, "ops": {...}}}, each part optional; checked by check_rng_config().
  static Result<Spec> from_json(const nlohmann::json& j, const std::string& where);
  static nlohmann::json to_json(const Spec& s);
  /// parse_rng_option() (virtio/rng/rng_option.h).
  static Result<Spec> from_cli(std::string_view spec);
  static void save_facts(snap::ByteWriter&, const Spec&, const VirtioDevice&) {}
  static Result<void> check_facts(snap::ByteReader&, const Spec&, const VirtioDevice&) {
    return {};
  }
  static Result<std::vector<snap::ProtectedFile>> protected_files(const VirtioDevice&, size_t) {
    return std::vector<snap::ProtectedFile>{};
  }
  static Result<void> flush(const VirtioDevice&) { return {}; }
};

/// virtio-net (src/virtio/net): one per network interface, in the order configured, after the
/// rng. A keyed list kind (iface_id).
struct NetKind {
  using Spec = NetSpec;
  static constexpr std::string_view kKind = "virtio-net";
  static constexpr std::string_view kLabel = "net";
  /// make_virtio_net() (virtio/net/virtio_net.h): opens the tap.
  static Result<std::shared_ptr<VirtioDevice>> make(const Spec& s, const std::string& name);
  static void encode(snap::ByteWriter& w, const Spec& s);
  /// Validates with check_net_config(s, "network-interfaces").
  static Result<Spec> decode(snap::ByteReader& r);
  static constexpr std::string_view kConfigKey = "network-interfaces";
  static constexpr std::string_view kApiPath = "/network-interfaces";
  static constexpr std::string_view kIdField = "iface_id";
  static constexpr std::string_view kCliOption = "--net";
  static constexpr std::string_view kCliIdPrefix = "net";
  static constexpr std::string_view kCliHelp =
      "virtio-net interface over a tap (repeatable; iface_id net0, net1, ...). SPEC: "
      "tap=NAME[,mac=MAC][,queues=N][,vhost=on|off][,mtu=N] (queues: RX/TX pairs, at most "
      "--cpus; vhost=on: /dev/vhost-net serves them)";
  /// Firecracker's NetworkInterface body: iface_id, host_dev_name, guest_mac; tern's queues,
  /// vhost, mtu; rx_rate_limiter / tx_rate_limiter refused by name. check_net_config().
  static Result<Spec> from_json(const nlohmann::json& j, const std::string& where);
  static nlohmann::json to_json(const Spec& s);
  /// parse_net_option() (virtio/net/net_option.h).
  static Result<Spec> from_cli(std::string_view spec, std::string id);
  static const std::string& id(const Spec& s) { return s.iface_id; }
  /// Firecracker's PartialNetworkInterface: iface_id only (the rate limiters are refused).
  static Result<void> from_patch_json(const nlohmann::json& j, const std::string& where);
  /// check_net_for_vm(): queue pairs ≤ vCPUs.
  static Result<void> check_for_vm(const Spec& s, uint32_t vcpus);
  /// Refuses a second interface on the tap of `other` (an earlier one: the tap's queues would
  /// be shared) or with its guest_mac; errors name the field ("host_dev_name").
  static Result<void> check_against(const Spec& s, const Spec& other);
  /// net_option_key() (virtio/net/net_option.h).
  static std::string cli_key(std::string_view field);
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
/// /dev/vda or /dev/nvme0n1; virtio and NVMe disks in their drive order), then the rng, then the
/// network interfaces. The rng stays before the interfaces so
/// that adding an interface to a VM moves no existing device (a restore uses the slot order
/// saved in the machine section, so either order restores the snapshots of an older tern).
using DeviceKinds = KindList<DiskKind, NvmeKind, RngKind, NetKind>;

/// One device of a VM configuration; the alternative's index is its kind's index in DeviceKinds.
using DeviceSpec = DeviceKinds::Spec;

/// The DeviceSpec of a disk: an NvmeSpec for interface nvme, else a DiskSpec (virtio-blk or
/// vhost-user-blk).
[[nodiscard]] inline DeviceSpec disk_device_spec(const DiskConfig& disk) {
  if (disk.interface == DiskInterface::kNvme)
    return DeviceSpec(std::in_place_type<NvmeSpec>, NvmeSpec{disk});
  return DeviceSpec(std::in_place_type<DiskSpec>, disk);
}

/// The DiskConfig of a disk's spec (virtio or NVMe), null for any other device.
[[nodiscard]] inline const DiskConfig* disk_config_of(const DeviceSpec& spec) {
  if (const auto* d = std::get_if<DiskSpec>(&spec)) return d;
  if (const auto* n = std::get_if<NvmeSpec>(&spec)) return &n->disk;
  return nullptr;
}

}  // namespace tern
