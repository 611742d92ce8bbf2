#include "firmware/fw_cfg/fw_cfg_device.h"

#include <algorithm>
#include <cstring>

namespace tern {

namespace {

constexpr uint64_t kDmaLowOffset = 8;
constexpr uint32_t kDmaKnownBits = FwCfgDevice::kDmaError | FwCfgDevice::kDmaRead |
                                   FwCfgDevice::kDmaSkip | FwCfgDevice::kDmaSelect |
                                   FwCfgDevice::kDmaWrite;

uint64_t load_be(std::span<const uint8_t> b) {
  uint64_t v = 0;
  for (uint8_t x : b) v = (v << 8) | x;
  return v;
}

/// FWCfgDmaAccess as it lies in guest memory: every field big-endian.
struct DmaAccess {
  uint8_t control[4];
  uint8_t length[4];
  uint8_t address[8];
};
static_assert(sizeof(DmaAccess) == 16);

}  // namespace

FwCfgDevice::FwCfgDevice(const GuestMemory& mem, fw_cfg::FwCfgItems items)
    : mem_(mem), items_(std::move(items)) {
  item_ = items_.find(selector_);
}

void FwCfgDevice::select(uint16_t key) {
  selector_ = key;
  item_ = items_.find(key);
  offset_ = 0;
  ++stats_.selects;
}

uint8_t FwCfgDevice::next_data_byte() {
  ++stats_.data_reads;
  if (item_ == nullptr || offset_ >= item_->size()) return 0;
  return (*item_)[offset_++];
}

void FwCfgDevice::read(uint64_t offset, std::span<uint8_t> data) {
  std::lock_guard lock(mu_);
  if (offset <= kDataOffset) {
    // The selector and data ports form one 2-byte region (QEMU's "fwcfg" I/O region): a read at
    // either returns item bytes, N bytes for an N-byte access.
    for (uint8_t& b : data) b = next_data_byte();
    return;
  }
  for (size_t i = 0; i < data.size(); ++i) {
    const uint64_t at = offset + i;
    if (at >= kDmaOffset && at < kDmaOffset + 8)
      data[i] = static_cast<uint8_t>(kDmaSignature >> (8 * (kDmaOffset + 7 - at)));
    else
      data[i] = 0xFF;  // ports 0x512, 0x513: unused
  }
}

void FwCfgDevice::write(uint64_t offset, std::span<const uint8_t> data) {
  std::lock_guard lock(mu_);
  if (offset == kSelectorOffset && data.size() == 2) {
    select(static_cast<uint16_t>(data[0] | (data[1] << 8)));
    return;
  }
  if (offset >= kDmaOffset) {
    write_dma_register(offset, data);
    return;
  }
  // A data-port write (read-only items since QEMU 2.4), a 1- or 4-byte selector write, or the
  // unused ports: ignored.
  ++stats_.bad_accesses;
}

void FwCfgDevice::write_dma_register(uint64_t offset, std::span<const uint8_t> data) {
  if (offset == kDmaOffset && data.size() == 4) {
    dma_high_ = static_cast<uint32_t>(load_be(data));
    return;
  }
  if (offset == kDmaLowOffset && data.size() == 4) {
    const uint64_t gpa = (uint64_t{dma_high_} << 32) | load_be(data);
    dma_high_ = 0;  // the register reads 0 "after an operation"
    run_dma(gpa);
    return;
  }
  if (offset == kDmaOffset && data.size() == 8) {
    dma_high_ = 0;
    run_dma(load_be(data));
    return;
  }
  ++stats_.bad_accesses;
  TERN_LOG_RATELIMITED(log_limit_, warn, "fw_cfg: ignored {}-byte write at DMA register +{}",
                       data.size(), offset - kDmaOffset);
}

void FwCfgDevice::run_dma(uint64_t descriptor_gpa) {
  DmaAccess d;
  if (!mem_.read(descriptor_gpa, std::span(reinterpret_cast<uint8_t*>(&d), sizeof d))) {
    ++stats_.dma_unreachable;
    TERN_LOG_RATELIMITED(log_limit_, warn, "fw_cfg: DMA descriptor at {:#x} is not in guest RAM",
                         descriptor_gpa);
    return;
  }
  ++stats_.dma_ops;
  const auto control = static_cast<uint32_t>(load_be(d.control));
  const auto length = static_cast<uint32_t>(load_be(d.length));
  const uint64_t address = load_be(d.address);
  const uint32_t result = execute_dma(control, length, address);
  if (result & kDmaError) {
    ++stats_.dma_errors;
    TERN_LOG_RATELIMITED(log_limit_, warn,
                         "fw_cfg: DMA error: control {:#x} length {} address {:#x} (selector "
                         "{:#x}, offset {})",
                         control, length, address, selector_, offset_);
  }
  // One aligned 4-byte store where the guest aligned the descriptor (SeaBIOS and OVMF poll it).
  const uint32_t be = __builtin_bswap32(result);
  (void)mem_.write_obj(descriptor_gpa, be);
}

uint32_t FwCfgDevice::execute_dma(uint32_t control, uint32_t length, uint64_t address) {
  // Parse: refuse what this device cannot do before changing anything.
  const uint32_t op_bits = control & 0xFFFF;
  if ((op_bits & ~kDmaKnownBits) != 0 || (op_bits & kDmaError) != 0) return kDmaError;
  const bool read = op_bits & kDmaRead;  // READ takes precedence over WRITE and SKIP (spec order)
  if (!read && (op_bits & kDmaWrite)) return kDmaError;  // every item is read-only
  const bool skip = !read && (op_bits & kDmaSkip);
  std::span<uint8_t> dest;
  if (read && length != 0) {
    auto s = mem_.slice(address, length);  // inside one RAM region, no wrap-around
    if (!s) return kDmaError;
    dest = *s;
  }

  // Execute.
  if (op_bits & kDmaSelect) select(static_cast<uint16_t>(control >> 16));
  const uint64_t size = item_ ? item_->size() : 0;
  const uint64_t left = size - std::min<uint64_t>(offset_, size);
  if (read) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(length, left));
    if (n != 0) std::memcpy(dest.data(), item_->data() + offset_, n);
    std::fill(dest.begin() + static_cast<ptrdiff_t>(n), dest.end(), uint8_t{0});
    offset_ += static_cast<uint32_t>(n);
    stats_.dma_bytes += n;
  } else if (skip) {
    offset_ += static_cast<uint32_t>(std::min<uint64_t>(length, left));
  }
  return 0;
}

FwCfgDevice::Stats FwCfgDevice::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace tern
