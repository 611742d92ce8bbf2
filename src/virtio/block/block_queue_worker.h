// BlockQueueWorker: the thread serving one virtio-blk request queue. It owns the queue's kick
// eventfd, a stop eventfd, an epoll over both plus its IoEngine's completion eventfd, and the
// engine itself. Chains are walked (Virtqueue), parsed (parse_block_request), then executed; the
// used ring is published and the driver notified (EVENT_IDX / NO_INTERRUPT respected) after each
// batch. A broken ring (§2.1.2) makes the worker call set_needs_reset() and ignore the queue.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/fd.h"
#include "base/log.h"
#include "block/bounce_pool.h"
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
  /// Makes the queue's engine instead of make_io_engine() (tests inject fakes); may be empty.
  IoEngineFactory engine_factory;
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
  [[nodiscard]] uint16_t index() const { return ctx_.index; }

  /// Parks the worker: it completes (used ring + interrupt) every request it took, then stops
  /// reading the ring and the kick eventfd. Returns once parked (or the thread has ended), with
  /// the queue position at that point.
  QueuePosition pause();
  /// Unparks a paused worker; it re-checks the ring at once. No-op if not paused.
  void resume();

 private:
  struct InFlight {
    BlockRequest req;
    unsigned pending_ops = 0;
    bool failed = false;
    bool host_error = false;
    bool synced = false;        // directsync DISCARD/WRITE_ZEROES: the fdatasync was issued
    uint8_t* bounce = nullptr;  // a chunk of bounce_ while a bounced IN/OUT holds one
    uint64_t bounce_done = 0;   // bytes of req.len already through the chunk
    uint64_t piece = 0;         // bytes of the piece in flight
    iovec bounce_iov{};
  };

  BlockQueueWorker(BlockQueueContext ctx, UniqueFd kick);
  void run();
  void process_queue();
  void serve(DescriptorChain chain);
  void start_io(uint16_t slot);
  /// Bounced IN/OUT: takes a chunk of the bounce budget (or queues the slot until one is free)
  /// and starts the first piece.
  void start_bounced(uint16_t slot);
  void start_piece(uint16_t slot);
  /// A piece completed OK: copies it out (IN); true if a further piece was started.
  bool advance_bounced(uint16_t slot);
  void handle_completions();
  void finish(uint16_t slot);
  void complete(uint16_t head, uint8_t* status, uint8_t value, uint32_t used_len);
  void publish();
  void mark_broken(const std::string& why);
  void drain_engine();
  /// Parks until resume() or the destructor. Returns false if the worker must stop.
  bool park();

  BlockQueueContext ctx_;
  Virtqueue vq_;
  UniqueFd kick_;
  UniqueFd stop_;
  UniqueFd epoll_;
  std::unique_ptr<IoEngine> engine_;
  std::vector<InFlight> slots_;
  std::vector<uint16_t> free_slots_;
  std::vector<IoCompletion> completions_;
  // O_DIRECT only: the queue's bounce budget and the slots waiting for a chunk of it, in order.
  std::optional<BouncePool> bounce_;
  std::deque<uint16_t> bounce_waiters_;
  bool broken_ = false;

  UniqueFd pause_;  // signalled by pause(): the thread parks at its next wakeup
  std::mutex park_mu_;
  std::condition_variable park_cv_;
  bool pause_requested_ = false;  // park_mu_
  bool parked_ = false;           // park_mu_
  bool stopping_ = false;         // park_mu_: the destructor wants the thread to end
  bool exited_ = false;           // park_mu_: run() returned
  QueuePosition parked_at_;       // park_mu_

  std::thread thread_;
};

}  // namespace tern::virtio
