// VirtioBlock: the virtio-blk device (virtio 1.2 §5.2) over a raw image file or block device.
//
// Offers VERSION_1, INDIRECT_DESC, EVENT_IDX, SIZE_MAX, SEG_MAX, BLK_SIZE, FLUSH, and RO (read-only
// disks) or DISCARD + WRITE_ZEROES (writable disks), MQ when queues > 1. Serves IN, OUT, FLUSH,
// GET_ID, DISCARD, WRITE_ZEROES; other types answer VIRTIO_BLK_S_UNSUPP. Each enabled queue gets a
// QueueWorker thread (VirtioDeviceBase) with its own epoll, running a BlockQueueHandler over a
// BlockExecutor (src/block/) with its own I/O engine.
//
// Thread-safety: read_config/write_config/device_features/stats/counters may be called from any
// thread at any time (the config is immutable, counters are atomics). activate(), reset() and
// quiesce() are serialized by the base's mutex.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/log.h"
#include "block/disk_config.h"
#include "block/disk_image.h"
#include "block/io_engine.h"
#include "virtio/block/block_stats.h"
#include "virtio/block/virtio_blk_spec.h"
#include "virtio/virtio_device_base.h"

namespace tern {

/// The virtio-blk device; see the file comment.
class VirtioBlock final : public virtio::VirtioDeviceBase {
 public:
  /// Validates `config` and opens the image now (before the guest boots), probing O_DIRECT
  /// alignment and io_uring support. Errors name the --disk field (see DiskImage::open and
  /// validate_disk_config). `name` is used in logs ("virtio-blk0").
  [[nodiscard]] static Result<std::shared_ptr<VirtioBlock>> create(
      const DiskConfig& config, std::string name = "virtio-blk0");
  ~VirtioBlock() override;

  /// struct virtio_blk_config (§5.2.4), 72 bytes; all fields read-only.
  void read_config(uint64_t offset, std::span<uint8_t> data) override;
  void write_config(uint64_t offset, std::span<const uint8_t> data) override;

  /// Queues activated from now on get their engine from `f` instead of make_io_engine() (tests
  /// inject fake or fault-injecting engines). Empty = the configured engine.
  void set_io_engine_factory(IoEngineFactory f) {
    std::lock_guard lock(factory_mu_);
    engine_factory_ = std::move(f);
  }

  /// The device's counters since it was built (any thread).
  [[nodiscard]] virtio::BlockStats stats() const;
  [[nodiscard]] const DiskImage& disk() const { return disk_; }
  /// The engine the queues use after the io_uring probe ("io_uring" or "threads").
  [[nodiscard]] IoEngineKind engine() const { return engine_; }
  /// The config space as the guest sees it.
  [[nodiscard]] const virtio::VirtioBlkConfig& config_space() const { return config_space_; }

 protected:
  /// A BlockQueueHandler over a new BlockExecutor and I/O engine (depth = queue size).
  [[nodiscard]] Result<std::unique_ptr<virtio::QueueHandler>> make_queue_handler(
      uint16_t index, const VirtqueueConfig& queue, uint64_t acked) override;
  /// BlockStats as named counters (reads, writes, ..., bounce_bytes).
  void device_counters(std::vector<std::pair<std::string, uint64_t>>& out) const override;

 private:
  VirtioBlock(DiskConfig config, DiskImage disk, std::string name);

  DiskConfig config_;
  DiskImage disk_;
  IoEngineKind engine_;
  std::mutex factory_mu_;
  IoEngineFactory engine_factory_;  // factory_mu_
  virtio::VirtioBlkConfig config_space_{};
  virtio::BlockCounters counters_;
};

}  // namespace tern
