// FwCfgDevice snapshot save/restore.
#include "devices/device_state.h"
#include "firmware/fw_cfg/fw_cfg_device.h"

namespace tern {

using devstate::bad_field;
using devstate::named;

namespace {
constexpr uint32_t kVersion = 1;
constexpr std::string_view kDev = "fw_cfg";
}  // namespace

void FwCfgDevice::save_state(snap::ByteWriter& w) const {
  std::lock_guard lock(mu_);
  w.u32(kVersion);
  w.u16(selector_);
  w.u32(offset_);
  w.u32(dma_high_);
}

Result<void> FwCfgDevice::restore_state(snap::ByteReader& r) {
  TRY(devstate::expect_version(r, kDev, kVersion));
  ASSIGN_OR_RETURN(uint16_t selector, named(kDev, "selector", r.u16()));
  ASSIGN_OR_RETURN(uint32_t offset, named(kDev, "offset", r.u32()));
  ASSIGN_OR_RETURN(uint32_t dma_high, named(kDev, "dma address", r.u32()));
  const std::vector<uint8_t>* item = items_.find(selector);
  const size_t size = item ? item->size() : 0;
  if (offset > size)
    return bad_field(kDev, "offset",
                     std::to_string(offset) + " past the end of item " + std::to_string(selector) +
                         " (" + std::to_string(size) + " bytes): the VM's fw_cfg items differ");
  std::lock_guard lock(mu_);
  selector_ = selector;
  item_ = item;
  offset_ = offset;
  dma_high_ = dma_high;
  return {};
}

}  // namespace tern
