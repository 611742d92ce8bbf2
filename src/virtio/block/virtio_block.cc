#include "virtio/block/virtio_block.h"

#include <algorithm>
#include <cstring>

#include <spdlog/spdlog.h>

#include "virtio/block/block_queue_handler.h"
#include "virtio/virtio_spec.h"

namespace tern {

using namespace virtio;

namespace {
constexpr uint32_t kMaxDiscardSectors = 0x3fffff;  // 2 GiB - 512 per segment
constexpr uint32_t kMaxDiscardSeg = 32;
constexpr uint32_t kSizeMax = 1u << 20;  // bytes per descriptor the driver should use
}  // namespace

Result<std::shared_ptr<VirtioBlock>> VirtioBlock::create(const DiskConfig& config,
                                                         std::string name) {
  TRY(validate_disk_config(config));
  ASSIGN_OR_RETURN(DiskImage disk, DiskImage::open(config));
  return std::shared_ptr<VirtioBlock>(new VirtioBlock(config, std::move(disk), std::move(name)));
}

namespace {
uint64_t offered_features(const DiskConfig& config, const DiskImage& disk) {
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
}  // namespace

VirtioBlock::VirtioBlock(DiskConfig config, DiskImage disk, std::string name)
    : VirtioDeviceBase(VIRTIO_ID_BLOCK, std::move(name), offered_features(config, disk),
                       config.queues, config.queue_size),
      config_(std::move(config)),
      disk_(std::move(disk)) {
  engine_ = config_.engine;
  if (engine_ == IoEngineKind::kIoUring && !io_uring_usable()) {
    spdlog::warn("{}: io_uring is not usable on this host; using the thread-pool I/O engine",
                 this->name());
    engine_ = IoEngineKind::kThreads;
  }

  auto& c = config_space_;
  c.capacity = disk_.capacity_sectors();
  c.size_max = kSizeMax;
  c.seg_max = static_cast<uint32_t>(config_.queue_size - 2);
  c.blk_size = disk_.logical_block_size();
  c.writeback = config_.cache == CacheMode::kDirectSync ? 0 : 1;
  c.num_queues = config_.queues;
  uint32_t align_sectors = disk_.logical_block_size() / 512;
  c.max_discard_sectors = kMaxDiscardSectors;
  c.max_discard_seg = kMaxDiscardSeg;
  c.discard_sector_alignment = align_sectors;
  c.max_write_zeroes_sectors = kMaxDiscardSectors;
  c.max_write_zeroes_seg = kMaxDiscardSeg;
  c.write_zeroes_may_unmap = 1;
}

VirtioBlock::~VirtioBlock() { reset(); }

void VirtioBlock::read_config(uint64_t offset, std::span<uint8_t> data) {
  std::fill(data.begin(), data.end(), 0);
  if (offset >= sizeof config_space_) return;
  size_t n = std::min<uint64_t>(data.size(), sizeof config_space_ - offset);
  std::memcpy(data.data(), reinterpret_cast<const uint8_t*>(&config_space_) + offset, n);
}

void VirtioBlock::write_config(uint64_t, std::span<const uint8_t>) {
  // Every field is read-only without VIRTIO_BLK_F_CONFIG_WCE, which tern does not offer.
}

Result<std::unique_ptr<QueueHandler>> VirtioBlock::make_queue_handler(
    uint16_t index, const VirtqueueConfig& queue, uint64_t acked) {
  BlockLimits limits;
  limits.capacity_sectors = disk_.capacity_sectors();
  limits.read_only = disk_.read_only();
  limits.discard = (acked & feature(VIRTIO_BLK_F_DISCARD)) != 0;
  limits.write_zeroes = (acked & feature(VIRTIO_BLK_F_WRITE_ZEROES)) != 0;
  limits.max_discard_sectors = config_space_.max_discard_sectors;
  limits.max_discard_seg = config_space_.max_discard_seg;
  limits.max_write_zeroes_sectors = config_space_.max_write_zeroes_sectors;
  limits.max_write_zeroes_seg = config_space_.max_write_zeroes_seg;
  limits.size_max = config_space_.size_max;
  limits.seg_max = config_space_.seg_max;

  IoEngineFactory factory;
  {
    std::lock_guard lock(factory_mu_);
    factory = engine_factory_;
  }
  std::unique_ptr<IoEngine> engine;
  if (factory) {
    ASSIGN_OR_RETURN(engine, factory(disk_.fd(), queue.size));
  } else {
    ASSIGN_OR_RETURN(engine, make_io_engine(engine_, disk_.fd(), queue.size));
  }
  ASSIGN_OR_RETURN(auto executor,
                   BlockExecutor::create(disk_, queue.size, std::move(engine), &counters_.io,
                                         &log_limit(),
                                         std::string(name()) + ": queue " + std::to_string(index)));
  return std::make_unique<BlockQueueHandler>(&counters_, limits, config_.serial,
                                             std::move(executor), queue.size);
}

BlockStats VirtioBlock::stats() const {
  BlockStats s = counters_.snapshot();
  s.requests = sum_queues(&QueueCounters::requests);
  s.needs_reset = sum_queues(&QueueCounters::needs_reset);
  s.malformed_chains += sum_queues(&QueueCounters::malformed);
  return s;
}

void VirtioBlock::device_counters(std::vector<std::pair<std::string, uint64_t>>& out) const {
  BlockStats s = stats();
  out.insert(out.end(), {{"requests", s.requests},
                         {"reads", s.reads},
                         {"writes", s.writes},
                         {"flushes", s.flushes},
                         {"get_ids", s.get_ids},
                         {"discards", s.discards},
                         {"write_zeroes", s.write_zeroes},
                         {"bytes_read", s.bytes_read},
                         {"bytes_written", s.bytes_written},
                         {"ioerr", s.ioerr},
                         {"unsupp", s.unsupp},
                         {"host_io_errors", s.host_io_errors},
                         {"malformed_chains", s.malformed_chains},
                         {"needs_reset", s.needs_reset},
                         {"bounced", s.bounced},
                         {"over_limits", s.over_limits},
                         {"bounce_waits", s.bounce_waits},
                         {"bounce_bytes", s.bounce_bytes}});
}

}  // namespace tern
