// The NvmeController's admin thread: controller enable, disable/reset and shutdown (NVMe base
// spec 1.4 §7.6.1, §7.6.2, §7.3), the admin queue (SQ0/CQ0), Asynchronous Event Request
// completion (§5.2), parking for snapshots.
#include <pthread.h>

#include "base/cpu_affinity.h"
#include "nvme/nvme_controller_impl.h"

namespace tern::nvme {

namespace {
constexpr uint32_t kShstMask = 3u << kCstsShstShift;
constexpr uint32_t field(uint32_t v, unsigned shift, uint32_t mask) {
  return (v >> shift) & mask;
}
}  // namespace

void NvmeController::admin_loop() {
  // Named as a device worker ("io-" prefix: tern stat --all counts it in the io class).
  pthread_setname_np(pthread_self(), "io-nvme-admin");
  pin_this_thread(ThreadClass::kIo);  // --cpu-affinity io
  std::unique_lock lock(mu_);
  for (;;) {
    if (stop_) return;
    const bool events = !events_.empty() && !aers_.empty() && acq_ring_ && acq_ring_->free() > 0;
    if (!requests_ && !admin_sq_tail_ && !admin_cq_head_ && !events) {
      if (park_) {  // idle: every request and command that can progress is done
        parked_ = true;
        parked_cv_.notify_all();
        // Woken by this unpark, not by park_ being false when we look: a quiesce right after
        // the unquiesce would find us "parked" with the requests made in between not done.
        const uint64_t gen = unpark_generation_;
        admin_cv_.wait(lock, [&] { return unpark_generation_ != gen || stop_; });
        parked_ = false;
      } else {
        admin_cv_.wait(lock);
      }
      continue;
    }
    const uint32_t req = std::exchange(requests_, 0);
    std::optional<uint32_t> tail = std::exchange(admin_sq_tail_, std::nullopt);
    std::optional<uint32_t> head = std::exchange(admin_cq_head_, std::nullopt);
    if (req & (kReqDisable | kReqEnable)) tail = head = std::nullopt;  // the old queue's
    lock.unlock();
    if (req & kReqDisable) do_disable(/*count_reset=*/true);
    if (req & kReqEnable) {
      bool want;
      {
        std::lock_guard l(mu_);
        want = (cc_ & kCcEn) && !admin_enabled_;
      }
      if (want) do_enable();
    }
    if (req & kReqShutdown) do_shutdown();
    if (asq_ring_ && acq_ring_) {
      if (tail) (void)asq_ring_->set_tail(*tail);  // validated by doorbell_write
      if (head) (void)acq_ring_->set_head(*head);
      process_admin_queue();
      deliver_async_events();
      if (admin_posted_) {
        admin_posted_ = false;
        queue_counters_[0].interrupts.fetch_add(1, std::memory_order_relaxed);
        signal(0, 0);
      }
    }
    lock.lock();
  }
}

void NvmeController::do_enable() {
  uint32_t cc, aqa;
  uint64_t asq, acq;
  {
    std::lock_guard lock(mu_);
    cc = cc_;
    aqa = aqa_;
    asq = asq_;
    acq = acq_;
  }
  const uint32_t sq_entries = (aqa & kAqaAsqsMask) + 1;
  const uint32_t cq_entries = ((aqa >> kAqaAcqsShift) & kAqaAsqsMask) + 1;
  const uint32_t iosqes = field(cc, kCcIosqesShift, 0xF), iocqes = field(cc, kCcIocqesShift, 0xF);
  const char* bad = nullptr;
  if (field(cc, kCcCssShift, 7) != 0)
    bad = "CC.CSS is not the NVM command set";
  else if (field(cc, kCcMpsShift, 0xF) != 0)
    bad = "CC.MPS is not 4 KiB (CAP.MPSMAX 0)";
  else if (field(cc, kCcAmsShift, 7) != 0)
    bad = "CC.AMS is not round robin";
  else if ((iosqes != 0 && iosqes != kSqEntryShift) || (iocqes != 0 && iocqes != kCqEntryShift))
    bad = "CC.IOSQES/IOCQES are not 6/4";
  else if (sq_entries < 2 || cq_entries < 2)
    bad = "AQA: an admin queue of one entry";
  else if (!ring_in_ram(mem_, asq, sq_entries, kSqEntryShift, limits_.page_size))
    bad = "ASQ is not page aligned guest RAM";
  else if (!ring_in_ram(mem_, acq, cq_entries, kCqEntryShift, limits_.page_size))
    bad = "ACQ is not page aligned guest RAM";
  std::lock_guard lock(mu_);
  if (bad) {
    controller_fatal_.fetch_add(1, std::memory_order_relaxed);
    TERN_LOG_RATELIMITED(log_limit_, warn, "{}: enable refused, Controller Fatal Status: {}",
                         name(), bad);
    csts_ |= kCstsCfs;
    return;
  }
  asq_ring_.emplace(mem_, SqConfig{.qid = 0, .gpa = asq, .entries = sq_entries, .cqid = 0});
  acq_ring_.emplace(mem_, CqConfig{.qid = 0, .gpa = acq, .entries = cq_entries, .vector = 0});
  intx_cq_[0] = IntxCq{.exists = true, .gpa = acq, .entries = cq_entries};
  admin_sq_tail_.reset();
  admin_cq_head_.reset();
  admin_enabled_ = true;
  csts_ = (csts_ & ~kCstsCfs) | kCstsRdy;
}

void NvmeController::stop_all_queues() {
  {
    std::unique_lock lock(dispatch_mu_);
    dispatch_ = Dispatch{};
  }
  {
    std::lock_guard lock(mu_);
    while (!ioeventfds_.empty())
      set_sq_ioeventfd_locked(ioeventfds_.begin()->first, BorrowedFd(-1), false);
    for (uint16_t q = 1; q <= kMaxIoQueues; ++q) intx_cq_[q] = IntxCq{};
  }
  // Destroying a worker completes its commands in flight and joins its thread.
  for (IoCq& cq : cqs_) {
    cq.worker.reset();
    cq.sqids.clear();
  }
  for (auto& sq : sqs_) sq.reset();
}

void NvmeController::do_disable(bool count_reset) {
  stop_all_queues();
  asq_ring_.reset();
  acq_ring_.reset();
  aers_.clear();  // §7.3.1: outstanding AERs are not completed across a reset
  features_ = FeatureValues{};
  write_cache_enabled_.store(true, std::memory_order_release);
  shut_down_ = false;
  admin_posted_ = false;
  if (count_reset) controller_resets_.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard lock(mu_);
  admin_enabled_ = false;
  admin_sq_tail_.reset();
  admin_cq_head_.reset();
  events_.clear();
  masked_event_types_ = 0;
  shadow_ = ShadowDoorbells{};
  shadow_enabled_.store(0, std::memory_order_relaxed);
  intx_cq_[0] = IntxCq{};
  intx_pending_ = 0;
  intx_update_locked();
  csts_ = 0;  // RDY, CFS and SHST cleared: the controller is idle and may be enabled again
}

void NvmeController::do_shutdown() {
  {
    // A reset seen in the same batch (CC.SHN then CC.EN 0 before we woke) already cleared
    // SHST: nothing to shut down, and shut_down_ must stay false (it pauses I/O until a reset).
    std::lock_guard lock(mu_);
    if (!(cc_ & kCcEn) || ((csts_ & kShstMask) >> kCstsShstShift) != kShstOccurring) return;
  }
  // §7.6.2: complete the commands in flight, make the data durable, then report complete.
  for (IoCq& cq : cqs_)
    if (cq.worker) cq.worker->pause();
  shut_down_ = true;
  if (auto r = disk_->disk().flush(); !r)
    TERN_LOG_RATELIMITED(log_limit_, warn, "{}: shutdown flush: {}", name(), r.error().message());
  std::lock_guard lock(mu_);
  if ((cc_ & kCcEn) && ((csts_ & kShstMask) >> kCstsShstShift) == kShstOccurring)
    csts_ = (csts_ & ~kShstMask) | (kShstComplete << kCstsShstShift);
}

void NvmeController::process_admin_queue() {
  SubmissionEntry sqe;
  // Every command fetched gets a completion slot (an AER held gives its slot back).
  while (acq_ring_->free() > 0 && asq_ring_->fetch(sqe)) {
    admin_commands_.fetch_add(1, std::memory_order_relaxed);
    queue_counters_[0].commands.fetch_add(1, std::memory_order_relaxed);
    uint32_t dw0 = 0;
    bool hold = false;
    Status st = execute_admin(sqe, dw0, hold);
    if (hold) {
      aers_.push_back(sqe.cid);
      continue;
    }
    complete_admin(sqe.cid, st, dw0);
  }
}

void NvmeController::complete_admin(uint16_t cid, Status status, uint32_t dw0) {
  if (!status.ok()) queue_counters_[0].errors.fetch_add(1, std::memory_order_relaxed);
  acq_ring_->post(CompletionEntry{.dw0 = dw0,
                                  .dw1 = 0,
                                  .sq_head = static_cast<uint16_t>(asq_ring_->head()),
                                  .sq_id = 0,
                                  .cid = cid,
                                  .status = status.field(false)});
  admin_posted_ = true;
}

void NvmeController::deliver_async_events() {
  while (!aers_.empty() && acq_ring_->free() > 0) {
    uint32_t dw0;
    {
      std::lock_guard lock(mu_);
      if (events_.empty()) return;
      dw0 = events_.front();
      events_.pop_front();
      // §5.2: an event type stays masked until the host reads its log page.
      masked_event_types_ |= static_cast<uint8_t>(1u << (dw0 & 7));
    }
    const uint16_t cid = aers_.front();
    aers_.erase(aers_.begin());
    complete_admin(cid, kSuccess, dw0);
  }
}

IoWorkerContext NvmeController::worker_context(uint16_t cqid) {
  IoWorkerContext ctx;
  ctx.mem = &mem_;
  ctx.disk = &disk_->disk();
  ctx.config = disk_->config();
  ctx.ns = info_.ns;
  ctx.limits = limits_;
  ctx.interrupts = this;
  ctx.counters = queue_counters_.get();
  ctx.executor_counters = &executor_counters_;
  ctx.io_counters = &io_counters_;
  ctx.log_limit = &worker_log_limit_;
  ctx.volatile_write_cache = &write_cache_enabled_;
  ctx.engine_factory = disk_->io_engine_factory();
  ctx.name = std::string(name()) + "/cq" + std::to_string(cqid);
  ctx.async_event = [this](uint32_t dw0) { post_async_event(dw0); };
  return ctx;
}

// ---- parking (snapshots) ----

void NvmeController::park_admin() {
  std::unique_lock lock(mu_);
  park_ = true;
  admin_cv_.notify_all();
  parked_cv_.wait(lock, [&] { return parked_; });
}

void NvmeController::unpark_admin() {
  {
    std::lock_guard lock(mu_);
    park_ = false;
    parked_ = false;  // the next park_admin() waits for the thread to be idle again
    ++unpark_generation_;
  }
  admin_cv_.notify_all();
}

}  // namespace tern::nvme
