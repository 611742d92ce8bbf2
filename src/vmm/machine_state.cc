#include "vmm/machine_state.h"

#include "snapshot/sections.h"
#include "vmm/devices/device_surfaces.h"

namespace tern::snap {

namespace {
constexpr uint32_t kMaxDevices = 64;
constexpr uint64_t kMaxFirmwareBytes = 16ull << 20;  // firmware/firmware_image.h

Result<std::optional<SavedFirmware>> decode_firmware(ByteReader& r, const MachineState& m) {
  ASSIGN_OR_RETURN(bool present, r.boolean());
  if (!present) return std::nullopt;
  SavedFirmware f;
  ASSIGN_OR_RETURN(f.path, r.string());
  ASSIGN_OR_RETURN(f.size, r.u64());
  ASSIGN_OR_RETURN(f.crc32, r.u32());
  ASSIGN_OR_RETURN(f.vars_path, r.string());
  if (f.path.empty()) return fail(r.what(), "firmware: empty path");
  if (f.size == 0 || f.size > kMaxFirmwareBytes)
    return fail(r.what(), "firmware: size " + std::to_string(f.size) + " is invalid (1..16 MiB)");
  if (!m.kernel_path.empty() || !m.initrd_path.empty())
    return fail(r.what(), "firmware: a firmware boot with a kernel or initrd");
  return f;
}
}  // namespace

void encode_machine_state(ByteWriter& w, const MachineState& m) {
  w.u64(m.memory_bytes);
  w.u32(m.vcpus);
  w.string(m.cmdline);
  w.string(m.kernel_path);
  w.string(m.initrd_path);
  w.u32(static_cast<uint32_t>(m.devices.size()));
  for (const auto& d : m.devices) encode_saved_device(w, d);
  w.u8(m.on_reboot == OnReboot::kRestart ? 1 : 0);
  w.boolean(m.firmware.has_value());
  if (m.firmware) {
    w.string(m.firmware->path);
    w.u64(m.firmware->size);
    w.u32(m.firmware->crc32);
    w.string(m.firmware->vars_path);
  }
}

Result<MachineState> decode_machine_state(ByteReader& r) {
  return decode_machine_state_version(r, kMachineSectionVersion);
}

Result<MachineState> decode_machine_state_version(ByteReader& r, uint32_t version) {
  if (version < 1 || version > kMachineSectionVersion)
    return fail(r.what(), "version " + std::to_string(version) + " (this tern reads 1 to " +
                              std::to_string(kMachineSectionVersion) + ")");
  MachineState m;
  ASSIGN_OR_RETURN(m.memory_bytes, r.u64());
  if (m.memory_bytes % 4096 != 0 || m.memory_bytes < (1ull << 20) || m.memory_bytes > (1ull << 40))
    return fail(r.what(), "memory size " + std::to_string(m.memory_bytes) + " is invalid");
  ASSIGN_OR_RETURN(m.vcpus, r.u32());
  if (m.vcpus == 0 || m.vcpus > 254)
    return fail(r.what(), "vCPU count " + std::to_string(m.vcpus) + " is invalid");
  ASSIGN_OR_RETURN(m.cmdline, r.string(64 * 1024));
  if (version >= 2) {
    ASSIGN_OR_RETURN(m.kernel_path, r.string());
    ASSIGN_OR_RETURN(m.initrd_path, r.string());
  }
  ASSIGN_OR_RETURN(uint32_t n, r.u32());
  if (n > kMaxDevices)
    return fail(r.what(),
                std::to_string(n) + (version == 1 ? " disks" : " devices") + " (at most 64)");
  for (uint32_t i = 0; i < n; ++i) {
    if (version == 1) {
      ASSIGN_OR_RETURN(auto d, decode_v1_disk(r, i));
      m.devices.push_back(std::move(d));
    } else {
      auto d = decode_saved_device(r, version);
      if (!d) return fail(r.what(), "device " + std::to_string(i) + ": " + d.error().message());
      m.devices.push_back(std::move(*d));
    }
  }
  if (version >= 7) {
    ASSIGN_OR_RETURN(uint8_t on_reboot, r.u8());
    if (on_reboot > 1)
      return fail(r.what(),
                  "on_reboot " + std::to_string(on_reboot) + " is invalid (0 exit, 1 restart)");
    m.on_reboot = on_reboot == 1 ? OnReboot::kRestart : OnReboot::kExit;
    ASSIGN_OR_RETURN(m.firmware, decode_firmware(r, m));
  }
  // What the VM was built after (two interfaces on one tap would share its queues).
  std::vector<DeviceSpec> specs;
  for (const SavedDevice& d : m.devices) specs.push_back(d.spec);
  if (auto ok = check_devices_for_vm(specs, m.vcpus, /*cli=*/false); !ok)
    return fail(r.what(), ok.error().message());
  TRY(r.expect_end());
  return m;
}

}  // namespace tern::snap
