#include "firmware/firmware_rom.h"

#include <cstring>

#include "base/log.h"

namespace tern::firmware {

void FirmwareRom::read(uint64_t offset, std::span<uint8_t> data) {
  for (size_t i = 0; i < data.size(); ++i) {
    uint64_t at = offset + i;
    data[i] = at < image_.size() ? image_[at] : 0xFF;
  }
}

void FirmwareRom::write(uint64_t offset, std::span<const uint8_t> data) {
  uint64_t n = writes_.fetch_add(1, std::memory_order_relaxed) + 1;
  // The first few are worth a line (firmware probing its flash); later ones only count.
  if (n <= 4)
    spdlog::debug("{}: guest wrote {} byte(s) at offset {:#x} of read-only firmware: ignored",
                  name_, data.size(), offset);
}

}  // namespace tern::firmware
