// I8042Port: one of the i8042's two I/O ports as a BusDevice.
#pragma once

#include <memory>
#include <string_view>

#include "base/result.h"
#include "bus/bus.h"
#include "devices/legacy/byte_io_device.h"
#include "devices/legacy/i8042.h"

namespace tern {

/// A one-byte facade over a shared I8042: the data port (0x60) or the command/status port
/// (0x64). Both facades share the controller, which serialises access.
class I8042Port final : public ByteIoDevice {
 public:
  enum class Kind { kData, kCommand };

  I8042Port(std::shared_ptr<I8042> controller, Kind kind)
      : ByteIoDevice(1), controller_(std::move(controller)), kind_(kind) {}

  [[nodiscard]] std::string_view name() const override {
    return kind_ == Kind::kData ? "i8042-data" : "i8042-cmd";
  }

 protected:
  uint8_t read_byte(uint64_t) override {
    return kind_ == Kind::kData ? controller_->read_data() : controller_->read_status();
  }
  void write_byte(uint64_t, uint8_t value) override {
    if (kind_ == Kind::kData) {
      controller_->write_data(value);
    } else {
      controller_->write_command(value);
    }
  }

 private:
  std::shared_ptr<I8042> controller_;
  Kind kind_;
};

/// Inserts `controller` on the PIO bus at x86::kI8042DataPort and x86::kI8042CommandPort.
[[nodiscard]] Result<void> insert_i8042(Bus& pio, std::shared_ptr<I8042> controller);

}  // namespace tern
