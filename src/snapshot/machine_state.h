// MachineState: the part of a snapshot that says which VM to rebuild before any state is applied —
// RAM size, vCPU count, the command line it booted with, and its disks (configuration and size).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "block/disk_config.h"
#include "snapshot/codec.h"

namespace tern::snap {

/// One disk as saved: the user's configuration and the image size in bytes at save time.
/// Disk contents stay in the image; restore refuses an image that is gone or changed size.
struct SavedDisk {
  DiskConfig config;
  uint64_t size_bytes = 0;
};

struct MachineState {
  uint64_t memory_bytes = 0;  ///< Guest RAM in bytes (multiple of 4 KiB).
  uint32_t vcpus = 0;
  std::string cmdline;        ///< For GET /vm/config and the operator; not re-applied.
  std::vector<SavedDisk> disks;
};

void encode_machine_state(ByteWriter& w, const MachineState& m);
/// Validates as untrusted input: memory 4 KiB-aligned and 1 MiB..1 TiB, vCPUs 1..254, at most
/// 64 disks, each DiskConfig valid (validate_disk_config). Errors name the field.
[[nodiscard]] Result<MachineState> decode_machine_state(ByteReader& r);

}  // namespace tern::snap
