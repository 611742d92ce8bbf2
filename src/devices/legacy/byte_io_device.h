// ByteIoDevice: base for 8-bit ISA-style register files on the PIO bus.
#pragma once

#include <cstdint>
#include <span>

#include "bus/bus_device.h"

namespace tern {

/// A BusDevice made of `size` byte-wide registers. Like the ISA/LPC bus in front of an 8-bit
/// chip, a wider access is split into byte accesses at consecutive offsets; bytes past the end
/// of the register file read as 0xFF and ignore writes. Subclasses implement the byte accessors
/// and do their own locking there (see BusDevice for the threading contract).
class ByteIoDevice : public BusDevice {
 public:
  void read(uint64_t offset, std::span<uint8_t> data) final;
  void write(uint64_t offset, std::span<const uint8_t> data) final;

  /// Number of byte registers; the length to insert the device with on the Bus.
  [[nodiscard]] uint64_t size() const { return size_; }

 protected:
  explicit ByteIoDevice(uint64_t size) : size_(size) {}
  /// Reads the register at `offset` (< size()).
  virtual uint8_t read_byte(uint64_t offset) = 0;
  /// Writes the register at `offset` (< size()).
  virtual void write_byte(uint64_t offset, uint8_t value) = 0;

 private:
  const uint64_t size_;
};

}  // namespace tern
