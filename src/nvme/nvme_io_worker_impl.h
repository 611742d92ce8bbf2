// NvmeIoWorker's state (internal to nvme_io_worker*.cc): what the worker thread owns, what any
// thread may touch under `mu`, and the few atomics the doorbell paths write without it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "nvme/nvme_io_worker.h"

namespace tern::nvme {

// epoll tags: kind in the high half, qid in the low 16 bits.
inline constexpr uint64_t kTagControl = uint64_t{1} << 32;
inline constexpr uint64_t kTagDoorbell = uint64_t{2} << 32;
inline constexpr uint64_t kTagCompletion = uint64_t{3} << 32;
/// EPOLL_CTL_ADD (`add`) or EPOLL_CTL_DEL of `fd` (EPOLLIN, `tag`).
[[nodiscard]] Result<void> epoll_watch(int epoll_fd, int fd, uint64_t tag, bool add);

/// One fetched command the executor holds (indexed by BlockOp::tag).
struct NvmeIoSlot {
  uint16_t cid = 0;
  BlockOp::Kind kind = BlockOp::Kind::kRead;
  uint64_t bytes = 0;    ///< Payload bytes counted on success (read / write).
  bool fua = false;      ///< Force Unit Access (Write, Write Zeroes).
  bool flushed = false;  ///< The kFlush making this write durable was issued.
};

/// One submission queue served by the worker.
struct NvmeSq {
  NvmeSq(const GuestMemory& mem, const SqConfig& c) : config(c), ring(mem, c) {}
  SqConfig config;
  SubmissionRing ring;                      ///< Worker thread (or any thread while parked).
  UniqueFd doorbell;                        ///< The SQ tail doorbell's eventfd.
  std::unique_ptr<BlockExecutor> executor;  ///< depth = entries.
  std::atomic<uint32_t> mmio_tail{0};       ///< Last valid MMIO tail (sq_doorbell()).
  // Worker thread only:
  std::vector<NvmeIoSlot> slots;
  std::vector<uint16_t> free_slots;
  uint32_t eventidx = UINT32_MAX;           ///< Last EventIdx written (shadow doorbells).
  std::optional<uint32_t> bad_shadow;       ///< Last invalid shadow tail reported.
  bool needs_flush = false;                 ///< Ops submitted since the executor's last flush().
  /// Served (tails read, EventIdx written) once its doorbell rang or the worker resumed: a queue
  /// added for a snapshot restore is not fetched from before restore() set its head.
  bool live = false;
  [[nodiscard]] uint32_t in_flight() const {
    return static_cast<uint32_t>(slots.size() - free_slots.size());
  }
};

struct NvmeIoWorker::Impl {
  Impl(const IoWorkerContext& c, const CqConfig& cqc, const ShadowDoorbells& s)
      : ctx(c), cq_config(cqc), cq(*c.mem, cqc), shadow(s) {}

  // ---- worker thread (nvme_io_worker_loop.cc) ----
  void run();
  /// Serves every SQ until nothing more can be fetched, then keeps EventIdx current.
  void process();
  void refresh_cq_head();
  /// INTx with shadow doorbells (InterruptSink::level_triggered()): CQ EventIdx = the host's
  /// head, so that the host rings the CQ head doorbell after it consumes what we signal.
  void arm_cq_head_doorbell();
  /// Tells the controller this CQ's head and the phase tag at it (InterruptSink::shadow_cq_head).
  void report_cq_head();
  void refresh_tail(NvmeSq& sq);
  /// Fetches, parses and submits while a CQ slot and an executor slot are free.
  void serve(NvmeSq& sq);
  void reap(NvmeSq& sq);
  /// Completes everything `sq` has in flight (blocking).
  void drain(NvmeSq& sq);
  /// A completed write `s` is to be followed by a kFlush before its completion is posted (FUA,
  /// or the volatile write cache off now).
  [[nodiscard]] bool needs_flush_before_completion(const NvmeIoSlot& s) const;
  void on_done(NvmeSq& sq, uint16_t slot, BlockStatus status);
  void post(NvmeSq& sq, uint16_t cid, Status status);
  /// One interrupt for the completions posted since the last one.
  void signal();
  /// CQ slots neither filled nor promised to a fetched command.
  [[nodiscard]] uint32_t cq_room() const;
  /// Takes new SQs, shadow config, removals and pause requests; false: stop.
  bool control();
  void remove_requested(std::unique_lock<std::mutex>& lk);
  /// Parked (or parking), under mu: MMIO doorbell values written since the worker last read
  /// them (their eventfds not read yet) go into the rings, as the admin queue's park takes its
  /// doorbells, so that save() writes the positions the host gave (no shadow doorbells).
  void read_mmio_doorbells();
  void refresh_active();

  // ---- any thread ----
  void invalid_doorbell(uint16_t qid, uint32_t value, bool completion);
  void wake() const;
  QueueCounters& counters(uint16_t qid) const { return ctx.counters[qid]; }

  IoWorkerContext ctx;
  const CqConfig cq_config;
  CompletionRing cq;  ///< Worker thread (or any thread while parked).
  UniqueFd epoll;
  UniqueFd control_fd;
  std::thread thread;

  // Worker thread only (any thread while parked):
  ShadowDoorbells shadow;
  std::vector<std::shared_ptr<NvmeSq>> active;  ///< In qid order.
  uint64_t active_generation = 0;
  uint32_t reserved = 0;     ///< CQ slots promised to fetched, not yet posted commands.
  uint32_t unsignalled = 0;  ///< CQEs posted since the last interrupt.
  std::optional<uint32_t> bad_cq_shadow;
  std::vector<BlockCompletion> done;

  // Doorbell paths, lock-free:
  std::atomic<uint32_t> cq_mmio_head{0};
  std::atomic<bool> waiting_for_room{false};

  // Guarded by mu:
  mutable std::mutex mu;
  std::condition_variable cv;
  std::map<uint16_t, std::shared_ptr<NvmeSq>> sqs;
  uint64_t generation = 0;  ///< Bumped whenever `sqs` changes.
  std::vector<uint16_t> removing;
  std::optional<ShadowDoorbells> new_shadow;
  bool pause_requested = false;
  bool parked = false;
  bool stopping = false;
  bool exited = false;
};

}  // namespace tern::nvme
