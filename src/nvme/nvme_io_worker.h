// NvmeIoWorker: one thread per I/O completion queue, serving every submission queue that
// completes to it (Linux pairs them 1:1): fetches commands, parses them (nvme_command.h), runs
// them through the shared BlockExecutor (one per SQ: io_uring, cache modes, O_DIRECT bounce),
// posts completions and signals the CQ's interrupt vector.
//
// Doorbells: an SQ tail doorbell reaches the worker either as an MMIO write the controller
// forwards (sq_doorbell(), which records the tail and signals the SQ's eventfd), or — once the
// host configured shadow doorbells (Doorbell Buffer Config, §5.8) — as a KVM ioeventfd on the
// doorbell register (no userspace exit), the tail then being read from the shadow page. The
// worker keeps each SQ's EventIdx at the tail it has consumed, so the host rings only when the
// worker may be asleep: the virtio EVENT_IDX scheme. CQ head doorbells always come through the
// controller (cq_doorbell()); with shadow doorbells the worker reads the shadow head and sets
// the CQ's EventIdx only when it waits for room.
//
// A completion slot is reserved for every command fetched, so the CQ never overflows: when it is
// full the worker stops fetching until the host moves the head.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/fd.h"
#include "base/log.h"
#include "base/result.h"
#include "block/block_executor.h"
#include "block/disk_config.h"
#include "block/disk_image.h"
#include "memory/guest_memory.h"
#include "nvme/nvme_command.h"
#include "nvme/nvme_queue.h"
#include "stats/device_counters.h"

namespace tern::nvme {

/// Per-queue counters for the controller's life (relaxed atomics), indexed by qid (SQ and CQ
/// of one qid share an entry; Linux pairs them).
struct QueueCounters {
  std::atomic<uint64_t> commands{0};         ///< SQ entries fetched (valid or not).
  std::atomic<uint64_t> doorbell_writes{0};  ///< SQ tail + CQ head doorbell writes seen (MMIO
                                             ///< exits and ioeventfd signals, summed).
  std::atomic<uint64_t> shadow_updates{0};   ///< New tails read from the shadow page.
  std::atomic<uint64_t> interrupts{0};       ///< Interrupts signalled for this CQ.
  std::atomic<uint64_t> bytes{0};            ///< Read + written payload bytes.
  std::atomic<uint64_t> errors{0};           ///< Commands completed with a non-zero status.
  std::atomic<uint64_t> invalid_doorbells{0};  ///< Doorbell values ≥ the queue size (ignored).
  /// As the statistics show it: kicks = doorbell_writes, requests = commands.
  [[nodiscard]] QueueCountersSnapshot snapshot(uint16_t qid) const;
};

/// Device-wide I/O command counters of one controller (relaxed atomics), shared by all its
/// workers: the controller's "reads", "writes", ... counters and the SMART / Health log's data
/// units and host commands come from here. Counted once per completed command.
struct IoCommandCounters {
  std::atomic<uint64_t> reads{0};           ///< Read commands completed successfully.
  std::atomic<uint64_t> writes{0};          ///< Write commands completed successfully.
  std::atomic<uint64_t> flushes{0};
  std::atomic<uint64_t> write_zeroes{0};
  std::atomic<uint64_t> deallocates{0};     ///< Dataset Management commands with AD set.
  std::atomic<uint64_t> read_bytes{0};      ///< Payload bytes of successful reads.
  std::atomic<uint64_t> written_bytes{0};   ///< Payload bytes of successful writes.
  std::atomic<uint64_t> invalid_commands{0};  ///< parse_io_command() refused the command.
  std::atomic<uint64_t> io_errors{0};       ///< The host I/O failed (executor error status).
  std::atomic<uint64_t> media_errors{0};    ///< Completed with a media error status (SCT 2).
};

/// How completions reach the host: the controller's MSI-X table, or INTx when MSI-X is off.
class InterruptSink {
 public:
  virtual ~InterruptSink() = default;
  /// Signals vector `vector` of CQ `cqid` (called from the worker after a batch of posts).
  virtual void signal(uint16_t cqid, uint16_t vector) = 0;
  /// True while completions reach the host over a level-triggered INTx line (MSI-X off): the
  /// line drops only once the controller sees the host consume the entries. With shadow
  /// doorbells the host writes its CQ head to the shadow page only, so the worker then keeps the
  /// CQ's EventIdx at the head it knows (the host's next head update rings the MMIO doorbell)
  /// and reports every new shadow head it reads (shadow_cq_head()).
  [[nodiscard]] virtual bool level_triggered() const { return false; }
  /// The worker's view of CQ `cqid` (level_triggered() only): the host's `head` as last read
  /// from the shadow page and the phase tag an unconsumed entry there carries (known from the
  /// worker's tail and phase, so the controller's copy is right even if it missed laps while
  /// MSI-X was on). Called at each new shadow head and at each signal.
  virtual void shadow_cq_head(uint16_t /*cqid*/, uint32_t /*head*/, bool /*head_phase*/) {}
};

/// What a worker shares with its controller; every pointer outlives the worker.
struct IoWorkerContext {
  const GuestMemory* mem = nullptr;
  const DiskImage* disk = nullptr;
  DiskConfig config;            ///< cache mode and engine (for the executors).
  NamespaceInfo ns;
  PrpLimits limits;
  InterruptSink* interrupts = nullptr;
  QueueCounters* counters = nullptr;  ///< Array indexed by qid (≥ 65 entries: qids 0..64).
  BlockExecutorCounters* executor_counters = nullptr;
  IoCommandCounters* io_counters = nullptr;  ///< May be null (then not counted).
  RateLimit* log_limit = nullptr;
  std::string name;             ///< Device name for logs and the thread name ("nvme0/cq1").
  /// Volatile Write Cache Enable (Set Features, §5.21.1.6) as the controller holds it; null:
  /// enabled. While 0, every Write and Write Zeroes is made durable (a flush) before it completes.
  const std::atomic<bool>* volatile_write_cache = nullptr;
  /// Makes each SQ's I/O engine; empty: make_io_engine(config.engine, ...). Tests inject one.
  IoEngineFactory engine_factory;
  /// The host's invalid doorbell writes and other asynchronous events go here (the controller
  /// completes an outstanding Asynchronous Event Request); may be called from the worker thread.
  std::function<void(uint32_t event_dw0)> async_event;
};

/// See the file comment. Methods other than the constructor and destructor may be called from
/// any thread (the controller's admin thread, vCPU threads for doorbells); they never block on
/// guest I/O except remove_sq() and pause(), which wait for in-flight commands.
class NvmeIoWorker {
 public:
  /// Starts the thread for completion queue `cq` (its ring checked by the caller). `shadow`:
  /// the Doorbell Buffer Config in force (possibly none). Errors: eventfd/epoll/thread creation.
  [[nodiscard]] static Result<std::unique_ptr<NvmeIoWorker>> create(const IoWorkerContext& ctx,
                                                                    const CqConfig& cq,
                                                                    const ShadowDoorbells& shadow);
  /// Stops the thread after completing every command in flight.
  ~NvmeIoWorker();
  NvmeIoWorker(const NvmeIoWorker&) = delete;
  NvmeIoWorker& operator=(const NvmeIoWorker&) = delete;

  /// Starts serving SQ `sq` (cqid = this worker's CQ). `doorbell`: an eventfd the worker reads
  /// (the controller registers it as the SQ tail doorbell's ioeventfd while shadow doorbells are
  /// on, and signals it itself for MMIO writes). Errors: the executor could not be created.
  [[nodiscard]] Result<void> add_sq(const SqConfig& sq, UniqueFd doorbell);
  /// Delete I/O Submission Queue: stops fetching from `qid`, waits for its in-flight commands to
  /// complete (their completions posted), forgets it. Unfetched entries are dropped (§5.6).
  void remove_sq(uint16_t qid);
  /// Number of SQs served (Delete I/O CQ refuses a CQ that still has some).
  [[nodiscard]] size_t sq_count() const;
  /// The doorbell eventfd of SQ `qid` (for the controller's ioeventfd registration).
  [[nodiscard]] BorrowedFd sq_doorbell_fd(uint16_t qid) const;

  /// MMIO write of SQ `qid`'s tail doorbell (vCPU thread): counted, validated (≥ entries: an
  /// Invalid Doorbell Write Value event, ignored), the worker woken.
  void sq_doorbell(uint16_t qid, uint32_t tail);
  /// MMIO write of this CQ's head doorbell: counted, validated, the worker woken if it waits
  /// for room.
  void cq_doorbell(uint32_t head);
  /// Doorbell Buffer Config took effect (or was reset to none): the worker reads tails from the
  /// shadow page from now on and writes EventIdx.
  void set_shadow(const ShadowDoorbells& shadow);

  /// Snapshots: stops fetching, completes every command in flight (posting their completions and
  /// interrupts), takes the MMIO doorbells written so far into the rings' positions, parks.
  /// Returns when parked.
  void pause();
  /// Resumes a paused worker (it re-reads doorbells at once).
  void resume();
  /// Paused only: the rings' positions, this CQ first then its SQs in qid order. The MMIO
  /// doorbells written since the worker last read them are taken into the positions first (a
  /// tail rung just before the snapshot is fetched by the restored worker; a CQ head is kept).
  void save(snap::ByteWriter& w);
  /// Before resume() on a worker created with the same CQ and add_sq()'d the same SQs: restores
  /// head/tail/phase of each ring (validated).
  [[nodiscard]] Result<void> restore(snap::ByteReader& r);
  /// After restore(), before resume(), MMIO doorbells only: `head` is the last CQ head the host
  /// wrote to the doorbell as the controller recorded it (its INTx copy). A snapshot from before
  /// save() took the MMIO doorbells into the rings may hold an older head in the worker's part;
  /// the host does not ring again for room it gave already. Ignored if ≥ the CQ's entries.
  void restore_cq_head(uint32_t head);

  [[nodiscard]] const CqConfig& cq() const;
  /// SQ configs served, in qid order.
  [[nodiscard]] std::vector<SqConfig> sqs() const;

 private:
  struct Impl;
  explicit NvmeIoWorker(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tern::nvme
