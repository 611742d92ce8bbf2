// NvmeKind (device_kinds.h): an emulated NVMe disk in the device registry. The product is an
// nvme::NvmeDisk (a PciFunctionModel: PciDevices builds its controller once the VM has guest
// memory); the image is tern's, so a snapshot checks its size, protects the file and flushes it,
// as for a virtio-blk disk tern serves.
#include <string>

#include "nvme/nvme_controller.h"
#include "vmm/devices/device_kinds.h"

namespace tern {

namespace {

const nvme::NvmeDisk& as_nvme(const PciFunctionModel& d) {
  const auto* disk = dynamic_cast<const nvme::NvmeDisk*>(&d);
  TERN_CHECK(disk != nullptr);  // make() built an NvmeDisk
  return *disk;
}

}  // namespace

Result<std::shared_ptr<PciFunctionModel>> NvmeKind::make(const Spec& s, const std::string& name) {
  ASSIGN_OR_RETURN(auto disk, nvme::NvmeDisk::create(s.disk, name));
  return std::shared_ptr<PciFunctionModel>(std::move(disk));
}

// Its own layout: path, cache, read-only, serial, engine; from machine section v4 on, the locking
// flag (tern before NVMe saved no "nvme" record, so v3 is the oldest).
void NvmeKind::encode(snap::ByteWriter& w, const Spec& s) {
  w.string(s.disk.path);
  w.u8(static_cast<uint8_t>(s.disk.cache));
  w.boolean(s.disk.read_only);
  w.string(s.disk.serial);
  w.u8(static_cast<uint8_t>(s.disk.engine));
  w.boolean(s.disk.locking);
  encode_disk_format(w, s.disk);  // machine section v6
}

Result<NvmeKind::Spec> NvmeKind::decode(snap::ByteReader& r, uint32_t version) {
  Spec s;
  s.disk.interface = DiskInterface::kNvme;
  ASSIGN_OR_RETURN(s.disk.path, r.string());
  ASSIGN_OR_RETURN(uint8_t cache, r.u8());
  if (cache > static_cast<uint8_t>(CacheMode::kDirectSync)) return fail(r.what(), "bad cache mode");
  s.disk.cache = static_cast<CacheMode>(cache);
  ASSIGN_OR_RETURN(s.disk.read_only, r.boolean());
  ASSIGN_OR_RETURN(s.disk.serial, r.string(64));
  ASSIGN_OR_RETURN(uint8_t engine, r.u8());
  if (engine > static_cast<uint8_t>(IoEngineKind::kThreads))
    return fail(r.what(), "bad I/O engine");
  s.disk.engine = static_cast<IoEngineKind>(engine);
  if (version >= 4) {
    ASSIGN_OR_RETURN(s.disk.locking, r.boolean());
  }
  if (version >= 6) TRY(decode_disk_format(r, s.disk));
  if (auto ok = validate_disk_config(s.disk); !ok) return fail(r.what(), ok.error().message());
  return s;
}

void NvmeKind::save_facts(snap::ByteWriter& w, const Spec&, const PciFunctionModel& d) {
  w.u64(as_nvme(d).disk().size_bytes());
}

// The namespace's contents live in the image: it must still be there (make() opened it) with
// the size the guest's Identify Namespace (NSZE) reported.
Result<void> NvmeKind::check_facts(snap::ByteReader& r, const Spec& s, const PciFunctionModel& d) {
  ASSIGN_OR_RETURN(uint64_t saved, r.u64());
  TRY(r.expect_end());
  uint64_t now = as_nvme(d).disk().size_bytes();
  if (now != saved)
    return fail(s.disk.path + ": image is " + std::to_string(now) +
                " bytes, the snapshot was taken with " + std::to_string(saved) +
                " (the disk changed size)");
  return {};
}

Result<std::vector<snap::ProtectedFile>> NvmeKind::protected_files(const PciFunctionModel& d,
                                                                   size_t index) {
  const DiskImage& img = as_nvme(d).disk();
  ASSIGN_OR_RETURN(auto f, snap::protected_file(img.fd().get(), "the VM's nvme disk " +
                                                                     std::to_string(index) + " (" +
                                                                     img.path() + ")"));
  return std::vector<snap::ProtectedFile>{std::move(f)};
}

Result<void> NvmeKind::flush(const PciFunctionModel& d) { return as_nvme(d).disk().flush(); }

}  // namespace tern
