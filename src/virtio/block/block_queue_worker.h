// BlockQueueWorker: the thread serving one virtio-blk request queue. It owns the queue's kick
// eventfd, a stop eventfd, an epoll over both plus its IoEngine's completion eventfd, and the
// engine itself. Chains are walked (Virtqueue), parsed (parse_block_request), then executed; the
// used ring is published and the driver notified (EVENT_IDX / NO_INTERRUPT respected) after each
// batch. A broken ring (§2.1.2) makes the worker call set_needs_reset() and ignore the queue.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/fd.h"
#include "base/log.h"
#include "block/disk_image.h"
#include "block/io_engine.h"
#include "virtio/block/block_request.h"
#include "virtio/block/block_stats.h"
#include "virtio/queue.h"
#include "virtio/virtio_device.h"

namespace tern::virtio {

/// Everything a worker needs; the referenced objects outlive the worker.
struct BlockQueueContext {
  const GuestMemory* mem = nullptr;
  const DiskImage* disk = nullptr;
  BlockCounters* counters = nullptr;
  RateLimit* log_limit = nullptr;
  std::shared_ptr<VirtioInterrupt> interrupt;
  VirtqueueConfig queue;
  uint16_t index = 0;            ///< Queue index (for signal_used_queue).
  uint64_t features = 0;         ///< Negotiated.
  BlockLimits limits;
  std::string serial;            ///< GET_ID answer (<= 20 bytes).
  std::string name;              ///< Device name for logs.
};

class BlockQueueWorker {
 public:
  /// Validates the queue layout, creates the engine (`engine` kind, depth = queue size) and starts
  /// the thread. Takes ownership of `kick`.
  [[nodiscard]] static Result<std::unique_ptr<BlockQueueWorker>> start(BlockQueueContext ctx,
                                                                      UniqueFd kick,
                                                                      IoEngineKind engine);
  /// Stops the thread after completing every request already handed to the engine.
  ~BlockQueueWorker();

  BlockQueueWorker(const BlockQueueWorker&) = delete;
  BlockQueueWorker& operator=(const BlockQueueWorker&) = delete;

  /// Name of the engine actually in use ("io_uring" or "threads").
  [[nodiscard]] std::string_view engine_name() const { return engine_->name(); }

 private:
  struct FreeDeleter {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  struct InFlight {
    BlockRequest req;
    unsigned pending_ops = 0;
    bool failed = false;
    bool host_error = false;
    std::unique_ptr<uint8_t, FreeDeleter> bounce;
    iovec bounce_iov{};
  };

  BlockQueueWorker(BlockQueueContext ctx, UniqueFd kick);
  void run();
  void process_queue();
  void serve(DescriptorChain chain);
  void start_io(uint16_t slot);
  void handle_completions();
  void finish(uint16_t slot);
  void complete(uint16_t head, uint8_t* status, uint8_t value, uint32_t used_len);
  void publish();
  void mark_broken(const std::string& why);

  BlockQueueContext ctx_;
  Virtqueue vq_;
  UniqueFd kick_;
  UniqueFd stop_;
  UniqueFd epoll_;
  std::unique_ptr<IoEngine> engine_;
  std::vector<InFlight> slots_;
  std::vector<uint16_t> free_slots_;
  std::vector<IoCompletion> completions_;
  bool broken_ = false;
  std::thread thread_;
};

}  // namespace tern::virtio
