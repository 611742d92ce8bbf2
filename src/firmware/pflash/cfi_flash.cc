#include "firmware/pflash/cfi_flash.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "base/result.h"

namespace tern {

namespace {

// Commands (Intel command set; the names of QemuFlash.c where OVMF uses them).
constexpr uint8_t kCmdReadArrayQemu = 0x00;  // QEMU's historic alias for read array
constexpr uint8_t kCmdProgram = 0x10;        // WRITE_BYTE_CMD
constexpr uint8_t kCmdBlockErase = 0x20;     // BLOCK_ERASE_CMD
constexpr uint8_t kCmdProgramAlt = 0x40;
constexpr uint8_t kCmdClearStatus = 0x50;  // CLEAR_STATUS_CMD
constexpr uint8_t kCmdLockSetup = 0x60;
constexpr uint8_t kCmdReadStatus = 0x70;  // READ_STATUS_CMD
constexpr uint8_t kCmdReadId = 0x90;      // READ_DEVID_CMD
constexpr uint8_t kCmdCfiQuery = 0x98;
constexpr uint8_t kCmdConfirm = 0xD0;    // BLOCK_ERASE_CONFIRM_CMD
constexpr uint8_t kCmdReadArray = 0xFF;  // READ_ARRAY_CMD
constexpr uint8_t kCmdLockBit = 0x01;
constexpr uint8_t kCmdLockDown = 0x2F;

}  // namespace

CfiFlash::CfiFlash(std::span<uint8_t> storage, uint32_t block_size)
    : storage_(storage), block_size_(block_size) {
  TERN_CHECK(block_size >= 256 && std::has_single_bit(block_size));
  TERN_CHECK(!storage.empty() && storage.size() % block_size == 0);
  // CFI query structure (JESD68.01), byte-addressed: one x8 device on a byte-wide bus.
  const uint64_t blocks = storage.size() / block_size;
  cfi_[0x10] = 'Q';
  cfi_[0x11] = 'R';
  cfi_[0x12] = 'Y';
  cfi_[0x13] = 0x01;  // primary command set: Intel/Sharp extended (0001)
  cfi_[0x15] = 0x31;  // primary extended table at 0x31
  cfi_[0x1B] = 0x45;  // Vcc min 4.5 V
  cfi_[0x1C] = 0x55;  // Vcc max 5.5 V
  cfi_[0x1F] = 0x07;  // typical single-byte program time 2^7 us
  cfi_[0x21] = 0x0A;  // typical block erase time 2^10 ms
  cfi_[0x23] = 0x04;  // max program time 2^4 x typical
  cfi_[0x25] = 0x04;  // max block erase time 2^4 x typical
  // Device size 2^n bytes: n rounded up (the store's 0x84000 is not a power of two).
  cfi_[0x27] = static_cast<uint8_t>(std::bit_width(storage.size() - 1));
  cfi_[0x28] = 0x00;  // interface: x8 only
  cfi_[0x2A] = 0x00;  // no write buffer (0xE8 is not offered)
  cfi_[0x2C] = 0x01;  // one erase-block region
  cfi_[0x2D] = static_cast<uint8_t>((blocks - 1) & 0xFF);
  cfi_[0x2E] = static_cast<uint8_t>(((blocks - 1) >> 8) & 0xFF);
  cfi_[0x2F] = static_cast<uint8_t>((block_size >> 8) & 0xFF);  // block size / 256
  cfi_[0x30] = static_cast<uint8_t>((block_size >> 16) & 0xFF);
  cfi_[0x31] = 'P';
  cfi_[0x32] = 'R';
  cfi_[0x33] = 'I';
  cfi_[0x34] = '1';
  cfi_[0x35] = '0';
  cfi_[0x3F] = 0x01;  // protection fields
}

uint8_t CfiFlash::read_byte(uint64_t offset) const {
  switch (mode_) {
    case Mode::kReadArray:
      return offset < storage_.size() ? storage_[offset] : 0xFF;
    case Mode::kReadId:
      switch (offset & 0xFF) {
        case 0:
          return kCfiManufacturerIntel;
        case 1:
          return kCfiDeviceId;
        default:
          return 0;  // 2: block lock status (unlocked)
      }
    case Mode::kCfiQuery:
      return offset < cfi_.size() ? cfi_[offset] : 0;
    default:
      // Status mode and every mode waiting for a second cycle read the status register, in
      // every byte lane (QEMU does the same for its 0x10/0x20/0x60/0x70 states).
      return status_;
  }
}

void CfiFlash::read(uint64_t offset, std::span<uint8_t> data) {
  if (offset >= storage_.size() || data.size() > storage_.size() - offset) ++counters_.out_of_range;
  for (size_t i = 0; i < data.size(); ++i) data[i] = read_byte(offset + i);
}

void CfiFlash::write(uint64_t offset, std::span<const uint8_t> data) {
  if (data.empty()) return;
  if (offset >= storage_.size() || data.size() > storage_.size() - offset) {
    ++counters_.out_of_range;
    sequence_error();
    return;
  }
  const uint8_t value = data[0];
  switch (mode_) {
    case Mode::kProgram:
      program(offset, data);
      return;
    case Mode::kEraseSetup:
      if (value == kCmdConfirm) {
        erase_block(erase_offset_);
      } else if (value == kCmdReadArray) {
        mode_ = Mode::kReadArray;  // erase cancelled
      } else {
        sequence_error();
      }
      return;
    case Mode::kLockSetup:
      if (value == kCmdLockBit || value == kCmdConfirm || value == kCmdLockDown) {
        status_ |= kCfiStatusReady;
        mode_ = Mode::kReadStatus;  // lock bits are not modelled: every block stays unlocked
      } else if (value == kCmdReadArray) {
        mode_ = Mode::kReadArray;
      } else {
        sequence_error();
      }
      return;
    default:
      command(offset, value);
      return;
  }
}

void CfiFlash::command(uint64_t offset, uint8_t cmd) {
  switch (cmd) {
    case kCmdReadArray:
    case kCmdReadArrayQemu:
      mode_ = Mode::kReadArray;
      return;
    case kCmdClearStatus:
      // QEMU clears every bit (also READY) and returns to read-array mode; OVMF's detection
      // depends on it: 0x50, then 0x70, must read 0x00 ("FD behaves as FLASH").
      status_ = 0;
      mode_ = Mode::kReadArray;
      return;
    case kCmdReadStatus:
      mode_ = Mode::kReadStatus;
      return;
    case kCmdReadId:
      mode_ = Mode::kReadId;
      return;
    case kCmdCfiQuery:
      mode_ = Mode::kCfiQuery;
      return;
    case kCmdProgram:
    case kCmdProgramAlt:
      mode_ = Mode::kProgram;
      return;
    case kCmdBlockErase:
      erase_offset_ = offset;
      mode_ = Mode::kEraseSetup;
      return;
    case kCmdLockSetup:
      mode_ = Mode::kLockSetup;
      return;
    default:
      sequence_error();  // unknown, or 0xE8 write-to-buffer (not offered by the query table)
      return;
  }
}

void CfiFlash::program(uint64_t offset, std::span<const uint8_t> data) {
  // QEMU's semantics: the bytes are stored as written (not ANDed into the array).
  std::memcpy(storage_.data() + offset, data.data(), data.size());
  mark_changed(offset, offset + data.size() - 1);
  ++counters_.programs;
  status_ |= kCfiStatusReady;
  mode_ = Mode::kReadStatus;
}

void CfiFlash::erase_block(uint64_t offset) {
  uint64_t start = offset & ~uint64_t{block_size_ - 1};
  std::memset(storage_.data() + start, 0xFF, block_size_);
  mark_changed(start, start + block_size_ - 1);
  ++counters_.erases;
  status_ |= kCfiStatusReady;
  mode_ = Mode::kReadStatus;
}

void CfiFlash::sequence_error() {
  ++counters_.bad_sequences;
  status_ |= kCfiStatusSequenceError | kCfiStatusReady;
  mode_ = Mode::kReadArray;
}

void CfiFlash::mark_changed(uint64_t first, uint64_t last) {
  if (!changed_) {
    changed_ = std::make_pair(first, last);
  } else {
    changed_->first = std::min(changed_->first, first);
    changed_->second = std::max(changed_->second, last);
  }
}

std::optional<std::pair<uint64_t, uint64_t>> CfiFlash::take_changed() {
  return std::exchange(changed_, std::nullopt);
}

void CfiFlash::reset() {
  mode_ = Mode::kReadArray;
  status_ = kCfiStatusReady;
}

bool CfiFlash::restore(uint8_t mode, uint8_t status, uint64_t erase_offset) {
  if (mode >= kModeCount || erase_offset >= storage_.size()) return false;
  erase_offset_ = erase_offset;
  mode_ = static_cast<Mode>(mode);
  status_ = status;
  return true;
}

}  // namespace tern
