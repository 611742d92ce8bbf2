// DiskKind (device_kinds.h): virtio-blk in the device registry.
#include "virtio/block/virtio_block.h"
#include "vmm/devices/device_kinds.h"

namespace tern {

namespace {
const VirtioBlock& as_block(const VirtioDevice& d) {
  // Only DiskKind::make() creates the devices these hooks are called with.
  return static_cast<const VirtioBlock&>(d);
}
}  // namespace

Result<std::shared_ptr<VirtioDevice>> DiskKind::make(const Spec& s, const std::string& name) {
  ASSIGN_OR_RETURN(auto blk, VirtioBlock::create(s, name));
  return std::shared_ptr<VirtioDevice>(std::move(blk));
}

void DiskKind::encode(snap::ByteWriter& w, const Spec& c) {
  w.string(c.path);
  w.u8(static_cast<uint8_t>(c.cache));
  w.boolean(c.read_only);
  w.string(c.serial);
  w.u16(c.queues);
  w.u16(c.queue_size);
  w.u8(static_cast<uint8_t>(c.engine));
}

Result<DiskKind::Spec> DiskKind::decode(snap::ByteReader& r) {
  Spec c;
  ASSIGN_OR_RETURN(c.path, r.string());
  ASSIGN_OR_RETURN(uint8_t cache, r.u8());
  if (cache > static_cast<uint8_t>(CacheMode::kDirectSync)) return fail(r.what(), "bad cache mode");
  c.cache = static_cast<CacheMode>(cache);
  ASSIGN_OR_RETURN(c.read_only, r.boolean());
  ASSIGN_OR_RETURN(c.serial, r.string(64));
  ASSIGN_OR_RETURN(c.queues, r.u16());
  ASSIGN_OR_RETURN(c.queue_size, r.u16());
  ASSIGN_OR_RETURN(uint8_t engine, r.u8());
  if (engine > static_cast<uint8_t>(IoEngineKind::kThreads))
    return fail(r.what(), "bad I/O engine");
  c.engine = static_cast<IoEngineKind>(engine);
  if (auto ok = validate_disk_config(c); !ok) return fail(r.what(), ok.error().message());
  return c;
}

void DiskKind::save_facts(snap::ByteWriter& w, const Spec&, const VirtioDevice& d) {
  w.u64(as_block(d).disk().size_bytes());
}

// Disk contents live in the image, so it must still be there (make() opened it) with its size.
Result<void> DiskKind::check_facts(snap::ByteReader& r, const Spec& s, const VirtioDevice& d) {
  ASSIGN_OR_RETURN(uint64_t saved, r.u64());
  TRY(r.expect_end());
  uint64_t now = as_block(d).disk().size_bytes();
  if (now != saved)
    return fail(s.path + ": image is " + std::to_string(now) +
                " bytes, the snapshot was taken with " + std::to_string(saved) +
                " (the disk changed size)");
  return {};
}

Result<std::vector<snap::ProtectedFile>> DiskKind::protected_files(const VirtioDevice& d,
                                                                   size_t index) {
  const DiskImage& img = as_block(d).disk();
  ASSIGN_OR_RETURN(
      auto f, snap::protected_file(img.fd().get(), "the VM's disk " + std::to_string(index) + " (" +
                                                       img.path() + ")"));
  return std::vector<snap::ProtectedFile>{std::move(f)};
}

Result<void> DiskKind::flush(const VirtioDevice& d) {
  return as_block(d).disk().flush();
}

}  // namespace tern
