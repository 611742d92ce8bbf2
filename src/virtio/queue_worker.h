// QueueWorker: the thread serving one virtqueue of any virtio device (Cloud Hypervisor's
// EpollHelper + a per-queue thread). It owns the queue's kick eventfd, a stop and a pause eventfd,
// an epoll over them plus the fds its device's QueueHandler registers (an I/O engine's completion
// eventfd, a rate limiter's timerfd), and the Virtqueue. It runs the ring loop (take chains while
// the handler is ready, publish the used ring, notify the driver as EVENT_IDX / NO_INTERRUPT
// ask, re-enable notifications), parks for snapshots with the queue position captured, and
// handles a broken ring (§2.1.2: set_needs_reset(), count, rate-limited log, queue ignored).
//
// Threading: the handler's hooks all run on the worker thread. pause()/resume()/the destructor
// are called by the device (one caller at a time).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/fd.h"
#include "base/log.h"
#include "virtio/notify_tuning.h"
#include "virtio/queue.h"
#include "virtio/queue_counters.h"
#include "virtio/virtio_device.h"

namespace tern::virtio {

class QueueWorker;

/// What a device supplies per queue. The worker calls serve() for each chain it takes while
/// ready() holds, flush() after a batch, on_fd() when a registered fd is readable, and drain()
/// before it parks or stops; hooks complete chains through QueueWorker::complete().
class QueueHandler {
 public:
  virtual ~QueueHandler() = default;
  /// Extra fds for the worker's epoll (EPOLLIN) and the tag passed to on_fd(); asked once at start.
  [[nodiscard]] virtual std::vector<std::pair<BorrowedFd, uint32_t>> fds() { return {}; }
  /// True if the handler can take another chain now (free slots, rate-limit tokens). When false
  /// the worker stops taking chains until an fd event or kick; the handler arranges the wake-up.
  [[nodiscard]] virtual bool ready(QueueWorker&) { return true; }
  /// Serves one validated chain (complete it now or later through w.complete()).
  virtual void serve(QueueWorker& w, DescriptorChain chain) = 0;
  /// Answers chain `head`, which the walker refused (already counted and logged). A request
  /// the device does not carry out must never look carried out to the driver. The default
  /// returns it with used length 0, which says "nothing written" truthfully where the used length
  /// is the answer (virtio-rng's entropy, virtio-net's RX frames; a TX frame is dropped). A
  /// device whose requests end in a status byte writes its error there
  /// (QueueWorker::refused_tail()) or, when the chain has no such byte, marks the queue broken
  /// (QueueWorker::mark_unanswerable()).
  virtual void refuse(QueueWorker& w, uint16_t head);
  /// End of a batch of serve() calls (e.g. submit queued I/O).
  virtual void flush(QueueWorker&) {}
  /// A registered fd with this tag is readable.
  virtual void on_fd(QueueWorker&, uint32_t /*tag*/) {}
  /// Completes every chain taken so far (blocking until done); called before parking and stopping.
  virtual void drain(QueueWorker&) {}
  /// Chains served and not yet completed. While > 0 a handler fd will wake the worker (the
  /// completion), which NotifyTuning relies on: kicks stay off and interrupts may be held only
  /// then. A handler whose chains wait for the guest or the outside world (virtio-net RX
  /// buffers, an entropy source) keeps the default 0.
  [[nodiscard]] virtual uint32_t in_flight() const { return 0; }
};

/// Optional per-queue hooks on the ring's life cycle (a vhost-user back-end's inflight tracking,
/// spec "Inflight I/O tracking"). All run on the worker thread. Absent (nullptr) for tern's
/// built-in devices, where they cost one pointer test per chain.
class QueueObserver {
 public:
  virtual ~QueueObserver() = default;
  /// Chain `head` was taken from the available ring (not called for resubmitted heads).
  virtual void on_pop(uint16_t head) = 0;
  /// Chain `head` was written to the used ring (not yet visible to the driver).
  virtual void on_used(uint16_t head) = 0;
  /// used->idx is about to be published as `used_idx` (the entries since the last publish).
  virtual void on_before_publish(uint16_t used_idx) = 0;
  /// used->idx `used_idx` was published.
  virtual void on_published(uint16_t used_idx) = 0;
};

/// Everything a worker needs; `mem`, `log_limit` and `counters` outlive the worker.
struct QueueWorkerContext {
  const GuestMemory* mem = nullptr;
  std::shared_ptr<VirtioInterrupt> interrupt;
  VirtqueueConfig queue;
  uint16_t index = 0;     ///< Queue index (for signal_used_queue and logs).
  uint64_t features = 0;  ///< Negotiated.
  std::string name;       ///< Device name for logs.
  RateLimit* log_limit = nullptr;
  QueueCounters* counters = nullptr;
  QueueObserver* observer = nullptr;  ///< Optional; outlives the worker.
  NotifyTuning tuning;                ///< Kick suppression, interrupt coalescing, polling.
  /// Heads still in flight when a previous server of this ring stopped (inflight region), in the
  /// order they were first taken: served before any new available entry. Each is walked again
  /// from the descriptor table; the handler cannot tell them from new chains.
  std::vector<uint16_t> resubmit;
};

/// One queue's worker thread; see the file comment.
class QueueWorker {
 public:
  /// Validates the queue layout, registers the handler's fds and starts the thread. Takes
  /// ownership of `kick` (made non-blocking) and `handler`.
  [[nodiscard]] static Result<std::unique_ptr<QueueWorker>> start(
      QueueWorkerContext ctx, UniqueFd kick, std::unique_ptr<QueueHandler> handler);
  /// Stops the thread after the handler's drain() and a final publish.
  ~QueueWorker();
  QueueWorker(const QueueWorker&) = delete;
  QueueWorker& operator=(const QueueWorker&) = delete;

  /// Parks the worker: the handler drains (used ring + interrupt for every chain taken), then the
  /// worker stops reading the ring and the kick eventfd. Returns once parked (or the thread has
  /// ended) with the queue position at that point.
  QueuePosition pause();
  /// Unparks a paused worker; it re-checks the ring at once. No-op if not paused.
  void resume();

  // ---- for the handler (worker thread only) ----

  /// Returns chain `head` through the used ring with `used_len` bytes written; `bytes` payload
  /// bytes moved and `error` (an error status or a refused request) go to the queue counters.
  void complete(uint16_t head, uint32_t used_len, uint64_t bytes = 0, bool error = false);
  /// Counts an error of this queue that completes no chain (virtio-net RX: a frame read from the
  /// tap and dropped, its buffers kept for the next one).
  void count_error() { QueueCounters::add(ctx_.counters->errors); }
  /// The ring is unusable (§2.1.2): DEVICE_NEEDS_RESET, count, log; the queue is ignored after.
  void mark_broken(const std::string& why);
  [[nodiscard]] bool broken() const { return broken_; }
  /// A chain the device cannot answer (no status byte to report its failure in): publishes the
  /// chains completed before it, so their answers reach the driver, then mark_broken().
  void mark_unanswerable(const std::string& why) {
    publish();
    mark_broken(why);
  }
  /// For QueueHandler::refuse(): the refused chain's last buffer when it is device-writable
  /// (refused_chain_tail(), virtio 1.2 §2.7.4.2).
  [[nodiscard]] std::optional<ChainSegment> refused_tail(uint16_t head) const {
    return vq_.refused_tail(head);
  }
  /// Stops (`watched` false) or resumes waking for the handler fd registered with `tag`
  /// (EPOLL_CTL_DEL / EPOLL_CTL_ADD, as epoll reports EPOLLERR even for no events): an RX
  /// handler without buffers ignores its readable tap until the driver kicks new ones (no
  /// spinning on a level-triggered fd). Kicks still wake the worker.
  void watch_fd(uint32_t tag, bool watched);
  /// Hands the newest `n` chains passed to serve() back to the available ring (the device
  /// re-reads them later): a handler's unused buffers (virtio-net RX) before it parks or stops.
  /// Returns false and changes nothing unless those n chains were all served after the last
  /// malformed one (a malformed chain already went to the used ring and must not be re-read);
  /// the handler then completes them instead.
  [[nodiscard]] bool unpop(uint16_t n);
  [[nodiscard]] const GuestMemory& mem() const { return *ctx_.mem; }
  [[nodiscard]] uint16_t index() const { return ctx_.index; }
  [[nodiscard]] uint64_t features() const { return ctx_.features; }
  [[nodiscard]] const std::string& name() const { return ctx_.name; }
  [[nodiscard]] RateLimit& log_limit() const { return *ctx_.log_limit; }
  [[nodiscard]] QueueHandler& handler() const { return *handler_; }

 private:
  QueueWorker(QueueWorkerContext ctx, UniqueFd kick, std::unique_ptr<QueueHandler> handler);
  void run();
  void process_queue();
  /// Publishes used->idx and notifies (or counts the suppressed notification); with
  /// tuning.coalesce_us holds the notification while other chains are in flight.
  void publish();
  /// Sends the used-buffer notification now (and disarms the coalescing timer).
  void signal_used();
  /// The queue is idle (nothing in flight, notifications about to be re-enabled): with
  /// tuning.poll_us, watches the available ring that long with notifications off. True if
  /// entries came (serve them), false when the time ran out or the ring broke.
  bool poll_available();
  void drain();
  /// Parks until resume() or the destructor. Returns false if the worker must stop.
  bool park();
  /// A pause or stop waits: the ring loop returns to run(), which handles it.
  [[nodiscard]] bool yield_requested() const { return yield_.load(std::memory_order_relaxed); }

  QueueWorkerContext ctx_;
  Virtqueue vq_;
  UniqueFd kick_;
  UniqueFd stop_;
  UniqueFd pause_;  // signalled by pause(): the thread parks at its next wakeup
  UniqueFd epoll_;
  UniqueFd coalesce_timer_;   // timerfd, only with tuning.coalesce_us
  bool irq_held_ = false;     // a used-buffer notification is owed, held by coalescing
  bool timer_armed_ = false;  // coalesce_timer_ runs
  std::unique_ptr<QueueHandler> handler_;
  bool broken_ = false;
  uint16_t published_ = 0;               // used->idx as last published (observer)
  size_t next_resubmit_ = 0;             // next entry of ctx_.resubmit to serve
  uint32_t unpublished_ = 0;             // used entries added since the last publish
  uint32_t served_since_malformed_ = 0;  // chains passed to serve() since the last malformed one
  std::vector<std::pair<int, uint64_t>> handler_fds_;  // fd, epoll tag (for watch_fd)

  std::mutex park_mu_;
  std::condition_variable park_cv_;
  bool pause_requested_ = false;  // park_mu_
  bool parked_ = false;           // park_mu_
  bool stopping_ = false;         // park_mu_: the destructor wants the thread to end
  bool exited_ = false;           // park_mu_: run() returned
  QueuePosition parked_at_;       // park_mu_
  // Set by pause() and the destructor before they signal their eventfd, cleared on resume: a
  // guest that keeps the ring busy (chains completed at once, each within poll_us of the last)
  // would otherwise keep process_queue() from ever returning to epoll_wait.
  std::atomic<bool> yield_{false};

  std::thread thread_;  // last: joined before the members above go away
};

}  // namespace tern::virtio
