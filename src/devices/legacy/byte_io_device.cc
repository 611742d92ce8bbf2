#include "devices/legacy/byte_io_device.h"

namespace tern {

void ByteIoDevice::read(uint64_t offset, std::span<uint8_t> data) {
  for (size_t i = 0; i < data.size(); ++i) {
    // offset < size_ first, so size_ - offset cannot wrap.
    bool inside = offset < size_ && i < size_ - offset;
    data[i] = inside ? read_byte(offset + i) : 0xFF;
  }
}

void ByteIoDevice::write(uint64_t offset, std::span<const uint8_t> data) {
  for (size_t i = 0; i < data.size(); ++i) {
    if (offset < size_ && i < size_ - offset) write_byte(offset + i, data[i]);
  }
}

}  // namespace tern
