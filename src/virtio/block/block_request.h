// BlockRequest: one virtio-blk request (virtio 1.2 §5.2.6) parsed from a validated descriptor
// chain into a value the device can execute without looking at the guest's descriptors again.
//
// Framing-agnostic (§2.7.4): the 16-byte header may be split across descriptors, the status byte
// is the last device-writable byte, data is whatever lies between. Parsing never writes guest
// memory and never fails "hard": every problem becomes a status to answer (IOERR / UNSUPP) or,
// when there is no status byte at all, a chain the device cannot answer (DEVICE_NEEDS_RESET).
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <vector>

#include "block/block_op.h"
#include "virtio/descriptor_chain.h"

namespace tern::virtio {

/// What the parser needs to know about the disk and the negotiated features.
struct BlockLimits {
  uint64_t capacity_sectors = 0;      ///< Disk size in 512-byte sectors.
  bool read_only = false;             ///< VIRTIO_BLK_F_RO offered.
  bool discard = false;               ///< VIRTIO_BLK_F_DISCARD negotiated.
  bool write_zeroes = false;          ///< VIRTIO_BLK_F_WRITE_ZEROES negotiated.
  uint32_t max_discard_sectors = 0;
  uint32_t max_discard_seg = 0;
  uint32_t max_write_zeroes_sectors = 0;
  uint32_t max_write_zeroes_seg = 0;
  /// IN/OUT: the most bytes one data segment (the data part of one descriptor) may hold, and the
  /// most data segments in one request — the size_max / seg_max the device advertises
  /// (§5.2.4). 0 = no limit. A request over either is answered VIRTIO_BLK_S_IOERR.
  uint32_t size_max = 0;
  uint32_t seg_max = 0;
};

/// One DISCARD / WRITE_ZEROES range in bytes (the BlockExecutor's type).
using BlockRange = ::tern::BlockRange;

struct BlockRequest {
  enum class Op {
    kNone,         ///< Nothing to execute: answer `status_value` (or drop if no status byte).
    kIn,           ///< Read `len` bytes at `offset` into `data`.
    kOut,          ///< Write `data` (`len` bytes) at `offset`.
    kFlush,
    kGetId,        ///< Write the serial into `data` (>= 20 bytes).
    kDiscard,      ///< `ranges`.
    kWriteZeroes,  ///< `ranges`.
  };
  Op op = Op::kNone;
  uint16_t head = 0;
  uint32_t type = 0;                 ///< Raw VIRTIO_BLK_T_* from the header (0 if unreadable).
  uint64_t offset = 0;               ///< kIn/kOut: bytes (sector * 512).
  uint64_t len = 0;                  ///< kIn/kOut/kGetId: data bytes.
  std::vector<iovec> data;           ///< Host views of the data area (validated guest RAM).
  std::vector<BlockRange> ranges;    ///< kDiscard / kWriteZeroes.
  uint8_t* status = nullptr;         ///< Host address of the status byte; null if missing.
  uint8_t status_value = 0;          ///< kNone: VIRTIO_BLK_S_IOERR or VIRTIO_BLK_S_UNSUPP.
  const char* problem = nullptr;     ///< kNone: why, for logs and tests.
  bool over_limits = false;          ///< kNone: refused for exceeding size_max / seg_max.

  /// Used length to report when the request succeeds (data written + status byte).
  [[nodiscard]] uint32_t success_used_len() const;
};

/// Parses `chain` (already walked and bounds-checked) against `limits`.
[[nodiscard]] BlockRequest parse_block_request(const DescriptorChain& chain,
                                               const BlockLimits& limits);

}  // namespace tern::virtio
