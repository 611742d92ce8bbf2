// A FwCfgDevice over a small fake guest memory, for the fw_cfg tests and the fuzzer: RAM is two
// regions, [0, kLowSize) and [kHighBase, kHighBase + kHighSize), so that buffers across a gap and
// addresses outside RAM can be tried.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "firmware/fw_cfg/fw_cfg_device.h"

namespace tern::fw_cfg::testing {

class FwCfgRig {
 public:
  static constexpr uint64_t kLowSize = 0x4000;
  static constexpr uint64_t kHighBase = 0x10000;
  static constexpr uint64_t kHighSize = 0x1000;

  explicit FwCfgRig(FwCfgItems items)
      : low_(kLowSize),
        high_(kHighSize),
        mem_(GuestMemory::wrap({MemoryRegion{0, kLowSize, low_.data(), 0},
                                MemoryRegion{kHighBase, kHighSize, high_.data(), kLowSize}})),
        dev_(std::make_unique<FwCfgDevice>(mem_, std::move(items))) {}

  FwCfgDevice& dev() { return *dev_; }
  const GuestMemory& mem() const { return mem_; }
  /// Replaces the device by a fresh one over the same memory (for restore tests).
  void recreate(FwCfgItems items) { dev_ = std::make_unique<FwCfgDevice>(mem_, std::move(items)); }

  void select(uint16_t key) {
    const uint8_t b[2] = {static_cast<uint8_t>(key), static_cast<uint8_t>(key >> 8)};
    dev_->write(FwCfgDevice::kSelectorOffset, b);
  }
  uint8_t data_byte() {
    uint8_t b = 0;
    dev_->read(FwCfgDevice::kDataOffset, std::span(&b, 1));
    return b;
  }
  std::vector<uint8_t> data_bytes(size_t n) {
    std::vector<uint8_t> v;
    for (size_t i = 0; i < n; ++i) v.push_back(data_byte());
    return v;
  }
  /// Writes a FWCfgDmaAccess (big-endian fields) at `gpa`, which must be RAM.
  void put_descriptor(uint64_t gpa, uint32_t control, uint32_t length, uint64_t address) {
    uint8_t d[16];
    put_be(d, control, 4);
    put_be(d + 4, length, 4);
    put_be(d + 8, address, 8);
    (void)mem_.write(gpa, d);
  }
  /// Starts DMA at `gpa` the way SeaBIOS and OVMF do: high half at 0x514, low half at 0x518.
  void start_dma(uint64_t gpa) {
    uint8_t hi[4], lo[4];
    put_be(hi, gpa >> 32, 4);
    put_be(lo, gpa, 4);
    dev_->write(FwCfgDevice::kDmaOffset, hi);
    dev_->write(FwCfgDevice::kDmaOffset + 4, lo);
  }
  /// The control field at `gpa` as the guest reads it back.
  uint32_t control_at(uint64_t gpa) {
    uint8_t c[4] = {};
    (void)mem_.read(gpa, c);
    return static_cast<uint32_t>(c[0]) << 24 | c[1] << 16 | c[2] << 8 | c[3];
  }
  std::vector<uint8_t> bytes_at(uint64_t gpa, size_t n) {
    std::vector<uint8_t> v(n);
    (void)mem_.read(gpa, v);
    return v;
  }

  static void put_be(uint8_t* out, uint64_t v, size_t width) {
    for (size_t i = 0; i < width; ++i) out[i] = static_cast<uint8_t>(v >> (8 * (width - 1 - i)));
  }

 private:
  std::vector<uint8_t> low_, high_;
  GuestMemory mem_;
  std::unique_ptr<FwCfgDevice> dev_;
};

}  // namespace tern::fw_cfg::testing
