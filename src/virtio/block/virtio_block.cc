#include "virtio/block/virtio_block.h"

#include <algorithm>
#include <cstring>

#include <spdlog/spdlog.h>

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

VirtioBlock::VirtioBlock(DiskConfig config, DiskImage disk, std::string name)
    : config_(std::move(config)), disk_(std::move(disk)), name_(std::move(name)) {
  engine_ = config_.engine;
  if (engine_ == IoEngineKind::kIoUring && !io_uring_usable()) {
    spdlog::warn("{}: io_uring is not usable on this host; using the thread-pool I/O engine",
                 name_);
    engine_ = IoEngineKind::kThreads;
  }
  features_ = feature(VIRTIO_F_VERSION_1) | feature(VIRTIO_F_INDIRECT_DESC) |
              feature(VIRTIO_F_EVENT_IDX) | feature(VIRTIO_BLK_F_SIZE_MAX) |
              feature(VIRTIO_BLK_F_SEG_MAX) | feature(VIRTIO_BLK_F_BLK_SIZE) |
              feature(VIRTIO_BLK_F_FLUSH);
  if (disk_.read_only())
    features_ |= feature(VIRTIO_BLK_F_RO);
  else
    features_ |= feature(VIRTIO_BLK_F_DISCARD) | feature(VIRTIO_BLK_F_WRITE_ZEROES);
  if (config_.queues > 1) features_ |= feature(VIRTIO_BLK_F_MQ);

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

Result<void> VirtioBlock::activate(const GuestMemory& mem, uint64_t acked_features,
                                   std::vector<VirtqueueConfig> queues, std::vector<UniqueFd> kicks,
                                   std::shared_ptr<VirtioInterrupt> interrupt) {
  std::lock_guard lock(mu_);
  workers_.clear();
  quiesced_ = false;
  positions_.clear();
  if (queues.size() != config_.queues || kicks.size() != queues.size())
    return fail(name_, "activate: expected " + std::to_string(config_.queues) + " queues");
  if (!interrupt) return fail(name_, "activate: no interrupt");
  uint64_t acked = acked_features & features_;
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

  std::vector<std::unique_ptr<BlockQueueWorker>> workers;
  for (uint16_t i = 0; i < queues.size(); ++i) {
    if (!queues[i].enabled) continue;
    if (queues[i].size == 0 || queues[i].size > config_.queue_size)
      return fail(name_, "queue " + std::to_string(i) + ": size " +
                             std::to_string(queues[i].size) + " not in 1.." +
                             std::to_string(config_.queue_size));
    BlockQueueContext ctx;
    ctx.mem = &mem;
    ctx.disk = &disk_;
    ctx.counters = &counters_;
    ctx.log_limit = &log_limit_;
    ctx.interrupt = interrupt;
    ctx.queue = queues[i];
    ctx.index = i;
    ctx.features = acked;
    ctx.limits = limits;
    ctx.serial = config_.serial;
    ctx.name = name_;
    ctx.engine_factory = engine_factory_;
    auto w = BlockQueueWorker::start(std::move(ctx), std::move(kicks[i]), engine_);
    if (!w) return fail(name_, "queue " + std::to_string(i) + ": " + w.error().message());
    workers.push_back(std::move(*w));
  }
  if (workers.empty()) return fail(name_, "activate: no queue enabled");
  workers_ = std::move(workers);
  return {};
}

void VirtioBlock::reset() {
  std::lock_guard lock(mu_);
  workers_.clear();  // each destructor drains its engine and joins its thread
  quiesced_ = false;
  positions_.clear();
}

void VirtioBlock::quiesce() {
  std::lock_guard lock(mu_);
  positions_.assign(config_.queues, QueuePosition{});
  // Each worker completes what it took from its ring, then parks.
  for (auto& w : workers_) positions_[w->index()] = w->pause();
  quiesced_ = true;
}

void VirtioBlock::unquiesce() {
  std::lock_guard lock(mu_);
  if (!quiesced_) return;
  for (auto& w : workers_) w->resume();
  quiesced_ = false;
}

std::vector<QueuePosition> VirtioBlock::queue_positions() const {
  std::lock_guard lock(mu_);
  if (positions_.size() != config_.queues) return std::vector<QueuePosition>(config_.queues);
  return positions_;
}

}  // namespace tern
