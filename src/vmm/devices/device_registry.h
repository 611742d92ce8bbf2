// The device registry: one way to create, save and re-create every device kind of
// device_kinds.h — used by boot (boot_inputs.cc), restore (restore_inputs.cc), the machine
// section (machine_state.cc) and snapshots (vm_snapshot.cc).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "snapshot/codec.h"
#include "snapshot/snapshot_pair.h"
#include "vmm/devices/device_kinds.h"
#include "vmm/devices/made_device.h"

namespace tern {

/// The kind's name ("virtio-blk", "virtio-rng"): snapshot key and statistics kind.
[[nodiscard]] std::string_view device_kind(const DeviceSpec& spec);
/// The device's name: kind + its index among the devices of that kind ("virtio-blk0").
[[nodiscard]] std::string device_name(const DeviceSpec& spec, size_t index);

/// Creates the device `spec` describes, named device_name(spec, index). Errors name the user's
/// field (e.g. "--disk path: ..."). A virtio device or a PciFunctionModel (an NVMe disk).
[[nodiscard]] Result<MadeDevice> make_device(const DeviceSpec& spec, size_t index);
/// make_device() for each spec in order, each indexed within its kind (virtio-blk0, virtio-blk1,
/// nvme0, virtio-rng0). The result is in the same order: the PCI slot order.
[[nodiscard]] Result<std::vector<MadeDevice>> make_devices(const std::vector<DeviceSpec>& specs);

/// One device as the machine section saves it: its spec and the host facts its kind checks at
/// restore (opaque here; e.g. a disk's image size).
struct SavedDevice {
  DeviceSpec spec;
  std::vector<uint8_t> facts;
};

/// The SavedDevice of a live `device` built from `spec`.
/// `device` must be what make_device(spec, ...) made.
[[nodiscard]] SavedDevice save_device(const DeviceSpec& spec, const MadeDevice& device);
/// Machine section v2/v3 record: kind string, spec blob (the current version's layout), facts
/// blob.
void encode_saved_device(snap::ByteWriter& w, const SavedDevice& d);
/// Decodes and validates one record of machine section `version` (2 or 3; untrusted); an
/// unknown kind is an error naming it.
[[nodiscard]] Result<SavedDevice> decode_saved_device(snap::ByteReader& r, uint32_t version);
/// Machine section v1 disk record (path, cache, read-only, serial, queues, queue size, engine,
/// image size) as a SavedDevice: v1 state files still restore.
[[nodiscard]] Result<SavedDevice> decode_v1_disk(snap::ByteReader& r, uint32_t i);

/// Re-creates the saved devices (same order and names as saved) and checks each kind's facts
/// (a disk: still there, same size). Errors are "snapshot <label> <i>: ...".
[[nodiscard]] Result<std::vector<MadeDevice>> make_restored_devices(
    const std::vector<SavedDevice>& saved);

/// Host files of the devices a snapshot must not be written over (their disk images).
[[nodiscard]] Result<std::vector<snap::ProtectedFile>> device_protected_files(
    const std::vector<SavedDevice>& saved, const std::vector<MadeDevice>& devices);
/// Makes completed guest writes of every device durable (disks: fdatasync).
[[nodiscard]] Result<void> flush_devices(const std::vector<SavedDevice>& saved,
                                         const std::vector<MadeDevice>& devices);

}  // namespace tern
