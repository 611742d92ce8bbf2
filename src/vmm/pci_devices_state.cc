// The snapshot "pci" section: PciRoot, then every function keyed by its kind and name.
#include "base/printable.h"
#include "vmm/pci_devices.h"

namespace tern {

namespace {
// Version 2: per function a kind string ("virtio-blk") instead of a virtio device type, and the
// function's state as a blob. Matches snap::kPciSectionVersion.
constexpr uint32_t kPciVersion = 2;
constexpr size_t kMaxFunctionState = 4 << 20;
constexpr size_t kMaxName = 256;
}  // namespace

void PciDevices::quiesce() {
  for (auto& f : functions_) f->quiesce();
  quiesced_ = true;
}

void PciDevices::unquiesce() {
  for (auto& f : functions_) f->unquiesce();
  quiesced_ = false;
}

void PciDevices::save_state(snap::ByteWriter& w) const {
  TERN_CHECK(quiesced_);  // queue positions are only consistent while quiesced
  w.u32(kPciVersion);
  root_->save_state(w);
  w.u32(static_cast<uint32_t>(functions_.size()));
  for (const auto& f : functions_) {
    w.string(f->kind());
    w.string(f->name());
    snap::ByteWriter fw;
    f->save_state(fw);
    w.blob(fw.data());
  }
}

Result<void> PciDevices::restore_state(snap::ByteReader& r) {
  ASSIGN_OR_RETURN(uint32_t v, r.u32());
  if (v != kPciVersion)
    return fail("restore pci devices", "version " + std::to_string(v) + " (this tern reads " +
                                           std::to_string(kPciVersion) + ")");
  TRY(root_->restore_state(r));
  ASSIGN_OR_RETURN(uint32_t n, r.u32());
  if (n != functions_.size())
    return fail("restore pci devices",
                "the snapshot has " + std::to_string(n) + " PCI function(s), this VM " +
                    std::to_string(functions_.size()) + " (restore with the same devices)");
  for (size_t i = 0; i < n; ++i) {
    PciFunction& f = *functions_[i];
    ASSIGN_OR_RETURN(std::string kind, r.string(kMaxName));
    ASSIGN_OR_RETURN(std::string name, r.string(kMaxName));
    if (kind != f.kind() || name != f.name())
      return fail("restore pci devices", "function " + std::to_string(i) + " is " +
                                             printable(name) + " (" + printable(kind) +
                                             ") in the snapshot, " + std::string(f.name()) + " (" +
                                             std::string(f.kind()) + ") in this VM");
    ASSIGN_OR_RETURN(auto state, r.blob(kMaxFunctionState));
    snap::ByteReader fr(state, "restore " + printable(name));
    TRY(f.restore_state(fr));
    TRY(fr.expect_end());
  }
  root_->refresh_bar_mappings();
  return r.expect_end();
}

}  // namespace tern
