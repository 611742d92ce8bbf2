// CfiFlash: the Intel/Sharp command set (CFI primary vendor command set 0001) of a byte-wide
// parallel NOR flash, as a pure state machine over a byte buffer (no KVM, no files).
//
// What it models is what OVMF's QemuFlashFvbServicesRuntimeDxe (QemuFlash.c) and QEMU's
// hw/block/pflash_cfi01.c agree on, for one x8 device on a byte-wide bus:
//   0xFF / 0x00  read array             0x70  read status register
//   0x50         clear status (→ array) 0x90  read identifier (0: manufacturer, 1: device)
//   0x10 / 0x40  program: the next write stores its bytes
//   0x20 + 0xD0  block erase (the block holding the address → 0xFF); 0x20 + 0xFF cancels
//   0x60 + 0x01/0xD0  block lock/unlock: accepted, no effect (blocks are never locked)
//   0x98         CFI query (the "QRY" table: size, one uniform erase-block region)
// Status register (Intel SR): 0x80 write state machine ready (always: operations complete at
// once), 0x20 erase error, 0x10 program error; 0x30 together = "command sequence error".
//
// Programming stores the written value, as QEMU does (real NOR can only clear bits; OVMF only
// ever programs erased bytes or clears state bits, so it cannot tell, and it was written against
// QEMU). Anything else — an unknown command, a bad erase confirm, a write-to-buffer (0xE8, not
// offered), an access past the end — sets the sequence-error bits (0x30), counts it and returns
// to read-array mode; the guest never makes this class fail. Writes in any "command" mode (read
// array, status, identifier, query) are commands, as on hardware.
//
// Threading: none; the owner serialises (PflashDevice holds its mutex around every call).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>

namespace tern {

/// Intel status register bits (SR.7, SR.5, SR.4).
inline constexpr uint8_t kCfiStatusReady = 0x80;
inline constexpr uint8_t kCfiStatusEraseError = 0x20;
inline constexpr uint8_t kCfiStatusProgramError = 0x10;
inline constexpr uint8_t kCfiStatusSequenceError = kCfiStatusEraseError | kCfiStatusProgramError;

/// Identifier codes read after 0x90 (Intel; QEMU's pc machine uses the same pair).
inline constexpr uint8_t kCfiManufacturerIntel = 0x89;
inline constexpr uint8_t kCfiDeviceId = 0x18;

class CfiFlash {
 public:
  /// What the next read returns / what the next write means. Values are saved in snapshots.
  enum class Mode : uint8_t {
    kReadArray = 0,   ///< reads return the array; writes are commands
    kReadStatus = 1,  ///< reads return the status register (after 0x70, a program or an erase)
    kReadId = 2,      ///< reads return the identifier codes
    kCfiQuery = 3,    ///< reads return the CFI query table
    kProgram = 4,     ///< the next write is data to store (after 0x10/0x40)
    kEraseSetup = 5,  ///< the next write must be 0xD0 (confirm) or 0xFF (cancel)
    kLockSetup = 6,   ///< the next write completes a lock-bit command (0x01, 0xD0, 0x2F)
  };
  static constexpr uint8_t kModeCount = 7;

  /// Guest-visible counters (monotonic).
  struct Counters {
    uint64_t programs = 0;       ///< program operations carried out
    uint64_t erases = 0;         ///< blocks erased
    uint64_t bad_sequences = 0;  ///< unknown commands and commands out of order (SR 0x30 set)
    uint64_t out_of_range = 0;   ///< accesses (partly) past the end of the array
  };

  /// A flash over `storage` (not owned; its size is the array size) with erase blocks of
  /// `block_size` bytes (a power of two dividing storage.size()). Starts in read-array mode with
  /// status 0x80.
  CfiFlash(std::span<uint8_t> storage, uint32_t block_size);

  /// A guest read of data.size() (1..8) bytes at byte `offset`. Bytes past the end read 0xFF.
  void read(uint64_t offset, std::span<uint8_t> data);
  /// A guest write of data.size() (1..8) bytes at `offset` (little-endian; a command is the low
  /// byte). Never fails; errors show in the status register and the counters.
  void write(uint64_t offset, std::span<const uint8_t> data);

  /// True in read-array mode: reads may go straight to the storage (ROMD mapping).
  [[nodiscard]] bool read_array() const { return mode_ == Mode::kReadArray; }
  [[nodiscard]] Mode mode() const { return mode_; }
  [[nodiscard]] uint8_t status() const { return status_; }
  [[nodiscard]] const Counters& counters() const { return counters_; }
  [[nodiscard]] uint32_t block_size() const { return block_size_; }
  [[nodiscard]] std::span<const uint8_t> storage() const { return storage_; }

  /// The byte range [first, last] changed since the last call (nullopt: none), then forgets it.
  [[nodiscard]] std::optional<std::pair<uint64_t, uint64_t>> take_changed();

  /// Power-on state: read-array mode, status 0x80 (contents and counters kept).
  void reset();
  /// The address a pending block erase (0x20) was written to.
  [[nodiscard]] uint64_t erase_offset() const { return erase_offset_; }
  /// Sets mode, status and the pending erase address from a saved state. False (nothing
  /// changed) when `mode` is not a Mode value or `erase_offset` is past the end.
  [[nodiscard]] bool restore(uint8_t mode, uint8_t status, uint64_t erase_offset);

  /// The CFI query table (byte-addressed from offset 0), filled from the geometry.
  [[nodiscard]] std::span<const uint8_t> query_table() const { return cfi_; }

 private:
  uint8_t read_byte(uint64_t offset) const;
  void command(uint64_t offset, uint8_t cmd);
  void program(uint64_t offset, std::span<const uint8_t> data);
  void erase_block(uint64_t offset);
  void sequence_error();
  void mark_changed(uint64_t first, uint64_t last);

  std::span<uint8_t> storage_;
  uint32_t block_size_;
  Mode mode_ = Mode::kReadArray;
  uint8_t status_ = kCfiStatusReady;
  uint64_t erase_offset_ = 0;  // address of the 0x20 (the block to erase on 0xD0)
  Counters counters_;
  std::optional<std::pair<uint64_t, uint64_t>> changed_;
  std::array<uint8_t, 0x40> cfi_{};
};

}  // namespace tern
