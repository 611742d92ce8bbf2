// What a virtio-blk device offers for one disk (virtio 1.2 §5.2.3, §5.2.4): the feature bits, the
// config space, and the request limits that follow from both and the negotiated features. Shared
// by the built-in device (VirtioBlock) and tern's vhost-user-blk back-end, so a guest sees the
// same disk either way.
#pragma once

#include <cstdint>

#include "block/disk_config.h"
#include "block/disk_image.h"
#include "virtio/block/block_request.h"
#include "virtio/block/virtio_blk_spec.h"
#include "virtio/notify_tuning.h"

namespace tern::virtio {

/// VERSION_1, INDIRECT_DESC, EVENT_IDX, SIZE_MAX, SEG_MAX, BLK_SIZE, FLUSH, then RO for a
/// read-only image or DISCARD + WRITE_ZEROES for a writable one, and MQ when queues > 1.
[[nodiscard]] uint64_t blk_device_features(const DiskConfig& config, const DiskImage& disk);

/// struct virtio_blk_config for the disk: capacity, size_max 1 MiB, seg_max queue_size - 2,
/// blk_size, writeback (0 for cache=directsync), num_queues, discard / write-zeroes limits.
[[nodiscard]] VirtioBlkConfig make_blk_config(const DiskConfig& config, const DiskImage& disk);

/// The request parser's limits for a queue, given the config space and the features the driver
/// acknowledged (DISCARD / WRITE_ZEROES are served only when negotiated).
[[nodiscard]] BlockLimits blk_limits(const VirtioBlkConfig& config_space, const DiskImage& disk,
                                     uint64_t acked);

/// The disk's notification tuning (--disk kick_suppress=, coalesce_us=, poll_us=) for its queue
/// workers, built-in and vhost-user back-end alike.
[[nodiscard]] inline NotifyTuning blk_notify_tuning(const DiskConfig& c) {
  return NotifyTuning{c.kick_suppress, c.coalesce_us, c.poll_us};
}

}  // namespace tern::virtio
