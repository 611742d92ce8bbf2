// VirtioBlock: the virtio-blk device (virtio 1.2 §5.2) over a raw image file or block device.
//
// Offers VERSION_1, INDIRECT_DESC, EVENT_IDX, SIZE_MAX, SEG_MAX, BLK_SIZE, FLUSH, and RO (read-only
// disks) or DISCARD + WRITE_ZEROES (writable disks), MQ when queues > 1. Serves IN, OUT, FLUSH,
// GET_ID, DISCARD, WRITE_ZEROES; other types answer VIRTIO_BLK_S_UNSUPP. Each enabled queue gets a
// BlockQueueWorker thread with its own epoll and I/O engine.
//
// Thread-safety: read_config/write_config/device_features/... may be called from any thread at
// any time (the config is immutable). activate() and reset() are serialized by an internal mutex.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/log.h"
#include "block/disk_config.h"
#include "block/disk_image.h"
#include "virtio/block/block_queue_worker.h"
#include "virtio/block/block_stats.h"
#include "virtio/block/virtio_blk_spec.h"
#include "virtio/virtio_device.h"

namespace tern {

class VirtioBlock final : public VirtioDevice {
 public:
  /// Validates `config` and opens the image now (before the guest boots), probing O_DIRECT
  /// alignment and io_uring support. Errors name the --disk field (see DiskImage::open and
  /// validate_disk_config). `name` is used in logs ("virtio-blk0").
  [[nodiscard]] static Result<std::shared_ptr<VirtioBlock>> create(
      const DiskConfig& config, std::string name = "virtio-blk0");
  ~VirtioBlock() override;

  [[nodiscard]] uint32_t device_type() const override { return virtio::VIRTIO_ID_BLOCK; }
  [[nodiscard]] std::string_view name() const override { return name_; }
  [[nodiscard]] uint64_t device_features() const override { return features_; }
  [[nodiscard]] uint16_t num_queues() const override { return config_.queues; }
  [[nodiscard]] uint16_t max_queue_size() const override { return config_.queue_size; }
  /// struct virtio_blk_config (§5.2.4), 72 bytes; all fields read-only.
  void read_config(uint64_t offset, std::span<uint8_t> data) override;
  void write_config(uint64_t offset, std::span<const uint8_t> data) override;
  /// Starts one worker per enabled queue. Disabled queues are left alone (a Linux guest with fewer
  /// CPUs than queues enables only some); fails if no queue is enabled or a ring is not in RAM.
  /// `mem` must outlive the activation (until reset()).
  [[nodiscard]] Result<void> activate(const GuestMemory& mem, uint64_t acked_features,
                                      std::vector<VirtqueueConfig> queues,
                                      std::vector<UniqueFd> kicks,
                                      std::shared_ptr<VirtioInterrupt> interrupt) override;
  void reset() override;
  /// Parks every queue worker after its in-flight requests complete (see VirtioDevice).
  void quiesce() override;
  void unquiesce() override;
  /// Positions recorded when the workers parked; {0, 0} for queues without a worker.
  [[nodiscard]] std::vector<QueuePosition> queue_positions() const override;

  /// Queues activated from now on get their engine from `f` instead of make_io_engine() (tests
  /// inject fake or fault-injecting engines). Empty = the configured engine.
  void set_io_engine_factory(IoEngineFactory f) {
    std::lock_guard lock(mu_);
    engine_factory_ = std::move(f);
  }

  [[nodiscard]] virtio::BlockStats stats() const { return counters_.snapshot(); }
  [[nodiscard]] const DiskImage& disk() const { return disk_; }
  /// The engine the queues use after the io_uring probe ("io_uring" or "threads").
  [[nodiscard]] IoEngineKind engine() const { return engine_; }
  /// The config space as the guest sees it.
  [[nodiscard]] const virtio::VirtioBlkConfig& config_space() const { return config_space_; }

 private:
  VirtioBlock(DiskConfig config, DiskImage disk, std::string name);

  DiskConfig config_;
  DiskImage disk_;
  std::string name_;
  uint64_t features_ = 0;
  IoEngineKind engine_;
  IoEngineFactory engine_factory_;  // mu_
  virtio::VirtioBlkConfig config_space_{};
  virtio::BlockCounters counters_;
  RateLimit log_limit_;
  mutable std::mutex mu_;  // activate / reset / quiesce
  std::vector<std::unique_ptr<virtio::BlockQueueWorker>> workers_;
  bool quiesced_ = false;
  std::vector<QueuePosition> positions_;  // per queue, set by quiesce()
};

}  // namespace tern
