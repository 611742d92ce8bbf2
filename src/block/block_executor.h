// BlockExecutor: executes BlockOps on one disk for one queue through an IoEngine: the in-flight
// slot table, O_DIRECT bounce buffers for unaligned guest memory (a BouncePool budget per
// executor; requests wait for a chunk in order), the WRITE_ZEROES -> punch-hole fallback where
// FALLOC_FL_ZERO_RANGE is missing, and cache=directsync's fdatasync after DISCARD / WRITE_ZEROES.
// Knows nothing of virtio: any storage frontend maps its requests onto BlockOps.
//
// Not thread-safe: one queue worker owns an executor. Its completion_fd() goes in the worker's
// epoll; reap() then returns finished ops.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/log.h"
#include "block/block_op.h"
#include "block/bounce_pool.h"
#include "block/disk_image.h"
#include "block/io_engine.h"

namespace tern {

/// Counters shared by a device's executors (relaxed atomics).
struct BlockExecutorCounters {
  std::atomic<uint64_t> bounced{0};       ///< O_DIRECT ops copied through a bounce buffer.
  std::atomic<uint64_t> bounce_waits{0};  ///< Bounced ops that waited for the bounce budget.
  std::atomic<uint64_t> bounce_bytes{0};  ///< Now: bytes of bounce buffers held.
};

/// See the file comment.
class BlockExecutor {
 public:
  /// `depth`: the most ops in flight (the queue size); `engine` serves `disk`'s fd. `counters`
  /// and `log_limit` outlive the executor; `log_prefix` starts host-error log lines.
  [[nodiscard]] static Result<std::unique_ptr<BlockExecutor>> create(
      const DiskImage& disk, unsigned depth, std::unique_ptr<IoEngine> engine,
      BlockExecutorCounters* counters, RateLimit* log_limit, std::string log_prefix);
  /// Returns the bounce memory to the counters. Call drain() first (buffers may be in flight).
  ~BlockExecutor();
  BlockExecutor(const BlockExecutor&) = delete;
  BlockExecutor& operator=(const BlockExecutor&) = delete;

  /// True if submit() can take another op.
  [[nodiscard]] bool has_free_slot() const { return !free_slots_.empty(); }
  /// Starts `op` (requires has_free_slot()), or finishes it at once and returns its status
  /// (cache=unsafe FLUSH, no ranges, an O_DIRECT offset/len not block-aligned, no bounce memory).
  /// Queued I/O reaches the kernel at flush().
  [[nodiscard]] std::optional<BlockStatus> submit(BlockOp op);
  /// Hands queued I/O to the engine.
  void flush();
  /// Readable when reap() may find completions.
  [[nodiscard]] BorrowedFd completion_fd() const { return engine_->completion_fd(); }
  /// Appends the ops that finished (and flushes follow-up I/O they started).
  void reap(std::vector<BlockCompletion>& out);
  /// Waits until nothing is in flight, appending every completion. Never returns early: when
  /// poll() on the completion fd fails it logs (rate-limited) and checks every millisecond.
  void drain(std::vector<BlockCompletion>& out);
  /// Name of the engine in use ("io_uring", "threads", or a test engine's).
  [[nodiscard]] std::string_view engine_name() const { return engine_->name(); }

 private:
  struct InFlight {
    BlockOp op;
    unsigned pending_ops = 0;
    bool failed = false;
    bool host_error = false;
    bool synced = false;        // directsync DISCARD/WRITE_ZEROES: the fdatasync was issued
    uint8_t* bounce = nullptr;  // a chunk of bounce_ while a bounced read/write holds one
    uint64_t bounce_done = 0;   // bytes of op.len already through the chunk
    uint64_t piece = 0;         // bytes of the piece in flight
    iovec bounce_iov{};
    // qcow2: the iovecs and expected length of each I/O op (user_data's op index).
    std::vector<std::vector<iovec>> pieces;
    std::vector<uint64_t> piece_lens;
  };

  BlockExecutor(const DiskImage& disk, std::unique_ptr<IoEngine> engine,
                BlockExecutorCounters* counters, RateLimit* log_limit, std::string log_prefix);
  void start_io(uint16_t slot);
  /// A qcow2 disk's read/write: host extents to the engine, the rest synchronously.
  void start_qcow2(uint16_t slot);
  /// A qcow2 disk's DISCARD / WRITE_ZEROES (synchronous).
  void zero_qcow2(uint16_t slot);
  /// Bounced read/write: takes a chunk of the bounce budget (or queues the slot until one is
  /// free) and starts the first piece.
  void start_bounced(uint16_t slot);
  void start_piece(uint16_t slot);
  /// A piece completed OK: copies it out (read); true if a further piece was started.
  bool advance_bounced(uint16_t slot);
  void finish(uint16_t slot);

  const DiskImage& disk_;
  std::unique_ptr<IoEngine> engine_;
  BlockExecutorCounters* counters_;
  RateLimit* log_limit_;
  std::string log_prefix_;
  std::vector<InFlight> slots_;
  std::vector<uint16_t> free_slots_;
  std::vector<IoCompletion> io_;
  std::vector<BlockCompletion>* out_ = nullptr;  // during reap(): where finish() appends
  // O_DIRECT only: the bounce budget and the slots waiting for a chunk of it, in order.
  std::optional<BouncePool> bounce_;
  std::deque<uint16_t> bounce_waiters_;
};

}  // namespace tern
