// PflashDevice snapshot save/restore: the command state and the whole contents, so that a restore
// gets exactly the store the guest had at the save, whatever the vars file holds by then.
#include <cstring>

#include "devices/device_state.h"
#include "firmware/pflash/pflash_device.h"

namespace tern {

using devstate::bad_field;
using devstate::named;

namespace {
constexpr uint32_t kVersion = 1;
constexpr std::string_view kDev = "pflash";
}  // namespace

void PflashDevice::save_state(snap::ByteWriter& w) const {
  std::lock_guard lock(mu_);
  w.u32(kVersion);
  w.u8(static_cast<uint8_t>(flash_->mode()));
  w.u8(flash_->status());
  w.u64(flash_->erase_offset());
  w.u64(size_);
  w.bytes(std::span<const uint8_t>(storage_.get(), size_));
}

Result<void> PflashDevice::restore_state(snap::ByteReader& r) {
  TRY(devstate::expect_version(r, kDev, kVersion));
  ASSIGN_OR_RETURN(uint8_t mode, named(kDev, "mode", r.u8()));
  ASSIGN_OR_RETURN(uint8_t status, named(kDev, "status", r.u8()));
  ASSIGN_OR_RETURN(uint64_t erase_offset, named(kDev, "erase address", r.u64()));
  ASSIGN_OR_RETURN(uint64_t size, named(kDev, "size", r.u64()));
  if (size != size_)
    return bad_field(kDev, "size",
                     std::to_string(size) + " bytes, but this VM's variable store (" +
                         file_->path() + ") has " + std::to_string(size_));
  ASSIGN_OR_RETURN(auto bytes, named(kDev, "contents", r.bytes(size)));
  if (mode >= CfiFlash::kModeCount)
    return bad_field(
        kDev, "mode",
        std::to_string(mode) + " (0.." + std::to_string(CfiFlash::kModeCount - 1) + ")");
  if (erase_offset >= size)
    return bad_field(kDev, "erase address", std::to_string(erase_offset) + " past the end");
  std::lock_guard lock(mu_);
  std::memcpy(storage_.get(), bytes.data(), size);
  TERN_CHECK(flash_->restore(mode, status, erase_offset));
  ++dirty_gen_;  // the file gets the snapshot's store at the next flush (or once quiet)
  TRY(set_romd(flash_->read_array()));
  cv_.notify_all();
  return {};
}

}  // namespace tern
