// PostCodeSink: port 0x80, the POST code port that Linux also uses for I/O delays.
#pragma once

#include <atomic>
#include <cstdint>
#include <string_view>

#include "devices/legacy/byte_io_device.h"

namespace tern {

/// Accepts and counts writes to the POST code port; reads return 0xFF.
///
/// Why 0xFF: on modern chipsets port 0x80 is a write-only forward to a debug display (there is
/// no register behind it to read), and QEMU returns all-ones too. Linux only ever writes it
/// (outb_p / io_delay), so the claim exists to avoid an unclaimed-port log per delay and to
/// keep the last code for debugging. Lock-free. Insert at x86::kPostCodePort, length 1.
class PostCodeSink final : public ByteIoDevice {
 public:
  PostCodeSink() : ByteIoDevice(1) {}

  [[nodiscard]] std::string_view name() const override { return "post-code"; }
  [[nodiscard]] uint64_t writes() const { return writes_.load(std::memory_order_relaxed); }
  [[nodiscard]] uint8_t last_code() const { return last_.load(std::memory_order_relaxed); }

 protected:
  uint8_t read_byte(uint64_t) override { return 0xFF; }
  void write_byte(uint64_t, uint8_t value) override {
    last_.store(value, std::memory_order_relaxed);
    writes_.fetch_add(1, std::memory_order_relaxed);
  }

 private:
  std::atomic<uint64_t> writes_{0};
  std::atomic<uint8_t> last_{0};
};

}  // namespace tern
