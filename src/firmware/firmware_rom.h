// FirmwareRom: the MMIO side of a firmware image mapped read-only (KVM_MEM_READONLY memslot).
// Guest reads come from the memslot without an exit; guest writes to a read-only slot exit to
// userspace as KVM_EXIT_MMIO (KVM API 4.35, KVM_MEM_READONLY) and land here: ignored (a ROM
// does not change) and counted. A read only reaches this device if KVM emulates an instruction
// that touches the ROM; it is served from the image's bytes.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <string>

#include "bus/bus_device.h"

namespace tern::firmware {

class FirmwareRom final : public BusDevice {
 public:
  /// `image` must outlive the device (it is the same memory the read-only memslot maps).
  FirmwareRom(std::string name, std::span<const uint8_t> image)
      : name_(std::move(name)), image_(image) {}
  [[nodiscard]] std::string_view name() const override { return name_; }
  /// Bytes of the image at `offset`; past its end all-ones. Any thread.
  void read(uint64_t offset, std::span<uint8_t> data) override;
  /// Ignored; counted in writes_ignored(). Any thread.
  void write(uint64_t offset, std::span<const uint8_t> data) override;
  /// Guest writes the ROM dropped.
  [[nodiscard]] uint64_t writes_ignored() const { return writes_.load(std::memory_order_relaxed); }

 private:
  std::string name_;
  std::span<const uint8_t> image_;
  std::atomic<uint64_t> writes_{0};
};

}  // namespace tern::firmware
