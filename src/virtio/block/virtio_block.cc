#include "virtio/block/virtio_block.h"

#include <algorithm>
#include <cstring>

#include <spdlog/spdlog.h>

#include "virtio/block/blk_config.h"
#include "virtio/block/block_queue_handler.h"
#include "virtio/virtio_spec.h"

namespace tern {

using namespace virtio;

Result<std::shared_ptr<VirtioBlock>> VirtioBlock::create(const DiskConfig& config,
                                                         std::string name) {
  TRY(validate_disk_config(config));
  ASSIGN_OR_RETURN(DiskImage disk, DiskImage::open(config));
  return std::shared_ptr<VirtioBlock>(new VirtioBlock(config, std::move(disk), std::move(name)));
}

VirtioBlock::VirtioBlock(DiskConfig config, DiskImage disk, std::string name)
    : VirtioDeviceBase(VIRTIO_ID_BLOCK, std::move(name), blk_device_features(config, disk),
                       config.queues, config.queue_size),
      config_(std::move(config)),
      disk_(std::move(disk)) {
  engine_ = config_.engine;
  if (engine_ == IoEngineKind::kIoUring && !io_uring_usable()) {
    spdlog::warn("{}: io_uring is not usable on this host; using the thread-pool I/O engine",
                 this->name());
    engine_ = IoEngineKind::kThreads;
  }
  config_space_ = make_blk_config(config_, disk_);
  set_notify_tuning(blk_notify_tuning(config_));
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
  BlockLimits limits = blk_limits(config_space_, disk_, acked);

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
  disk_.append_counters(out);
}

}  // namespace tern
