#include "virtio/block/blk_config.h"

#include "virtio/virtio_spec.h"

namespace tern::virtio {

namespace {
constexpr uint32_t kMaxDiscardSectors = 0x3fffff;  // 2 GiB - 512 per segment
constexpr uint32_t kMaxDiscardSeg = 32;
constexpr uint32_t kSizeMax = 1u << 20;  // bytes per descriptor the driver should use
}  // namespace

uint64_t blk_device_features(const DiskConfig& config, const DiskImage& disk) {
  uint64_t f = feature(VIRTIO_F_VERSION_1) | feature(VIRTIO_F_INDIRECT_DESC) |
               feature(VIRTIO_F_EVENT_IDX) | feature(VIRTIO_BLK_F_SIZE_MAX) |
               feature(VIRTIO_BLK_F_SEG_MAX) | feature(VIRTIO_BLK_F_BLK_SIZE) |
               feature(VIRTIO_BLK_F_FLUSH);
  if (disk.read_only())
    f |= feature(VIRTIO_BLK_F_RO);
  else
    f |= feature(VIRTIO_BLK_F_DISCARD) | feature(VIRTIO_BLK_F_WRITE_ZEROES);
  if (config.queues > 1) f |= feature(VIRTIO_BLK_F_MQ);
  return f;
}

VirtioBlkConfig make_blk_config(const DiskConfig& config, const DiskImage& disk) {
  VirtioBlkConfig c{};
  c.capacity = disk.capacity_sectors();
  c.size_max = kSizeMax;
  c.seg_max = static_cast<uint32_t>(config.queue_size - 2);
  c.blk_size = disk.logical_block_size();
  c.writeback = config.cache == CacheMode::kDirectSync ? 0 : 1;
  c.num_queues = config.queues;
  c.max_discard_sectors = kMaxDiscardSectors;
  c.max_discard_seg = kMaxDiscardSeg;
  c.discard_sector_alignment = disk.logical_block_size() / 512;
  c.max_write_zeroes_sectors = kMaxDiscardSectors;
  c.max_write_zeroes_seg = kMaxDiscardSeg;
  c.write_zeroes_may_unmap = 1;
  return c;
}

BlockLimits blk_limits(const VirtioBlkConfig& c, const DiskImage& disk, uint64_t acked) {
  BlockLimits limits;
  limits.capacity_sectors = disk.capacity_sectors();
  limits.read_only = disk.read_only();
  limits.discard = (acked & feature(VIRTIO_BLK_F_DISCARD)) != 0;
  limits.write_zeroes = (acked & feature(VIRTIO_BLK_F_WRITE_ZEROES)) != 0;
  limits.max_discard_sectors = c.max_discard_sectors;
  limits.max_discard_seg = c.max_discard_seg;
  limits.max_write_zeroes_sectors = c.max_write_zeroes_sectors;
  limits.max_write_zeroes_seg = c.max_write_zeroes_seg;
  limits.size_max = c.size_max;
  limits.seg_max = c.seg_max;
  return limits;
}

}  // namespace tern::virtio
