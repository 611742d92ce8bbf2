#include "snapshot/machine_state.h"

namespace tern::snap {

void encode_machine_state(ByteWriter& w, const MachineState& m) {
  w.u64(m.memory_bytes);
  w.u32(m.vcpus);
  w.string(m.cmdline);
  w.u32(static_cast<uint32_t>(m.disks.size()));
  for (const auto& d : m.disks) {
    w.string(d.config.path);
    w.u8(static_cast<uint8_t>(d.config.cache));
    w.boolean(d.config.read_only);
    w.string(d.config.serial);
    w.u16(d.config.queues);
    w.u16(d.config.queue_size);
    w.u8(static_cast<uint8_t>(d.config.engine));
    w.u64(d.size_bytes);
  }
}

Result<MachineState> decode_machine_state(ByteReader& r) {
  MachineState m;
  ASSIGN_OR_RETURN(m.memory_bytes, r.u64());
  if (m.memory_bytes % 4096 != 0 || m.memory_bytes < (1ull << 20) || m.memory_bytes > (1ull << 40))
    return fail(r.what(), "memory size " + std::to_string(m.memory_bytes) + " is invalid");
  ASSIGN_OR_RETURN(m.vcpus, r.u32());
  if (m.vcpus == 0 || m.vcpus > 254)
    return fail(r.what(), "vCPU count " + std::to_string(m.vcpus) + " is invalid");
  ASSIGN_OR_RETURN(m.cmdline, r.string(64 * 1024));
  ASSIGN_OR_RETURN(uint32_t ndisks, r.u32());
  if (ndisks > 64) return fail(r.what(), std::to_string(ndisks) + " disks (at most 64)");
  for (uint32_t i = 0; i < ndisks; ++i) {
    SavedDisk d;
    ASSIGN_OR_RETURN(d.config.path, r.string());
    ASSIGN_OR_RETURN(uint8_t cache, r.u8());
    if (cache > static_cast<uint8_t>(CacheMode::kDirectSync))
      return fail(r.what(), "disk " + std::to_string(i) + ": bad cache mode");
    d.config.cache = static_cast<CacheMode>(cache);
    ASSIGN_OR_RETURN(d.config.read_only, r.boolean());
    ASSIGN_OR_RETURN(d.config.serial, r.string(64));
    ASSIGN_OR_RETURN(d.config.queues, r.u16());
    ASSIGN_OR_RETURN(d.config.queue_size, r.u16());
    ASSIGN_OR_RETURN(uint8_t engine, r.u8());
    if (engine > static_cast<uint8_t>(IoEngineKind::kThreads))
      return fail(r.what(), "disk " + std::to_string(i) + ": bad I/O engine");
    d.config.engine = static_cast<IoEngineKind>(engine);
    ASSIGN_OR_RETURN(d.size_bytes, r.u64());
    if (auto ok = validate_disk_config(d.config); !ok)
      return fail(r.what(), "disk " + std::to_string(i) + ": " + ok.error().message());
    m.disks.push_back(std::move(d));
  }
  TRY(r.expect_end());
  return m;
}

}  // namespace tern::snap
