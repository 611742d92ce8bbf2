// virtio-blk constants and layouts from the virtio 1.2 spec, §5.2.
#pragma once

#include <cstdint>

#include "virtio/virtio_spec.h"

namespace tern::virtio {

// Feature bits (§5.2.3).
inline constexpr unsigned VIRTIO_BLK_F_SIZE_MAX = 1;
inline constexpr unsigned VIRTIO_BLK_F_SEG_MAX = 2;
inline constexpr unsigned VIRTIO_BLK_F_GEOMETRY = 4;
inline constexpr unsigned VIRTIO_BLK_F_RO = 5;
inline constexpr unsigned VIRTIO_BLK_F_BLK_SIZE = 6;
inline constexpr unsigned VIRTIO_BLK_F_FLUSH = 9;
inline constexpr unsigned VIRTIO_BLK_F_TOPOLOGY = 10;
inline constexpr unsigned VIRTIO_BLK_F_CONFIG_WCE = 11;
inline constexpr unsigned VIRTIO_BLK_F_MQ = 12;
inline constexpr unsigned VIRTIO_BLK_F_DISCARD = 13;
inline constexpr unsigned VIRTIO_BLK_F_WRITE_ZEROES = 14;

// Request types (§5.2.6).
inline constexpr uint32_t VIRTIO_BLK_T_IN = 0;
inline constexpr uint32_t VIRTIO_BLK_T_OUT = 1;
inline constexpr uint32_t VIRTIO_BLK_T_FLUSH = 4;
inline constexpr uint32_t VIRTIO_BLK_T_GET_ID = 8;
inline constexpr uint32_t VIRTIO_BLK_T_GET_LIFETIME = 10;
inline constexpr uint32_t VIRTIO_BLK_T_DISCARD = 11;
inline constexpr uint32_t VIRTIO_BLK_T_WRITE_ZEROES = 13;
inline constexpr uint32_t VIRTIO_BLK_T_SECURE_ERASE = 14;

// Status byte values (§5.2.6).
inline constexpr uint8_t VIRTIO_BLK_S_OK = 0;
inline constexpr uint8_t VIRTIO_BLK_S_IOERR = 1;
inline constexpr uint8_t VIRTIO_BLK_S_UNSUPP = 2;

/// struct virtio_blk_discard_write_zeroes flags.
inline constexpr uint32_t VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP = 1;

inline constexpr uint64_t kSectorSize = 512;  ///< Sector unit of the protocol, in bytes.
inline constexpr uint32_t VIRTIO_BLK_ID_BYTES = 20;

/// The request header (struct virtio_blk_req's first 16 bytes).
struct VirtioBlkOuthdr {
  uint32_t type;
  uint32_t reserved;
  uint64_t sector;  ///< Offset in 512-byte sectors.
};
static_assert(sizeof(VirtioBlkOuthdr) == 16);

/// One DISCARD / WRITE_ZEROES segment (struct virtio_blk_discard_write_zeroes).
struct VirtioBlkDiscardWriteZeroes {
  uint64_t sector;
  uint32_t num_sectors;
  uint32_t flags;
};
static_assert(sizeof(VirtioBlkDiscardWriteZeroes) == 16);

/// struct virtio_blk_config (§5.2.4), up to and including the write-zeroes fields.
struct __attribute__((packed)) VirtioBlkConfig {
  uint64_t capacity;  ///< In 512-byte sectors.
  uint32_t size_max;
  uint32_t seg_max;
  uint16_t cylinders;
  uint8_t heads;
  uint8_t sectors;
  uint32_t blk_size;
  uint8_t physical_block_exp;
  uint8_t alignment_offset;
  uint16_t min_io_size;
  uint32_t opt_io_size;
  uint8_t writeback;
  uint8_t unused0;
  uint16_t num_queues;
  uint32_t max_discard_sectors;
  uint32_t max_discard_seg;
  uint32_t discard_sector_alignment;
  uint32_t max_write_zeroes_sectors;
  uint32_t max_write_zeroes_seg;
  uint8_t write_zeroes_may_unmap;
  uint8_t unused1[3];
  uint32_t max_secure_erase_sectors;
  uint32_t max_secure_erase_seg;
  uint32_t secure_erase_sector_alignment;
};
static_assert(sizeof(VirtioBlkConfig) == 72);

}  // namespace tern::virtio
