// NvmeIoWorker's public surface: creation, SQ add/remove, doorbells, pause/resume, snapshots.
// The worker thread's loop is in nvme_io_worker_loop.cc.
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <system_error>

#include "nvme/nvme_io_worker.h"
#include "nvme/nvme_io_worker_impl.h"

namespace tern::nvme {

QueueCountersSnapshot QueueCounters::snapshot(uint16_t qid) const {
  QueueCountersSnapshot s;
  s.index = qid;
  s.kicks = doorbell_writes.load(std::memory_order_relaxed);
  s.requests = commands.load(std::memory_order_relaxed);
  s.interrupts = interrupts.load(std::memory_order_relaxed);
  s.bytes = bytes.load(std::memory_order_relaxed);
  s.errors = errors.load(std::memory_order_relaxed);
  return s;
}

void NvmeIoWorker::Impl::wake() const {
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(control_fd.get(), &one, sizeof one);
}

void NvmeIoWorker::Impl::invalid_doorbell(uint16_t qid, uint32_t value, bool completion) {
  counters(qid).invalid_doorbells.fetch_add(1, std::memory_order_relaxed);
  TERN_LOG_RATELIMITED(*ctx.log_limit, warn, "{}: {} {} doorbell value {} is not below the queue size",
                       ctx.name, completion ? "CQ" : "SQ", qid, value);
  // Error event, Invalid Doorbell Write Value, Error Information log (§5.2, Figure 146).
  if (ctx.async_event) ctx.async_event(async_event_dw0(0, 1, 1));
}

NvmeIoWorker::NvmeIoWorker(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<NvmeIoWorker>> NvmeIoWorker::create(const IoWorkerContext& ctx,
                                                           const CqConfig& cq,
                                                           const ShadowDoorbells& shadow) {
  TERN_CHECK(ctx.mem != nullptr && ctx.disk != nullptr && ctx.interrupts != nullptr &&
             ctx.counters != nullptr && ctx.executor_counters != nullptr &&
             ctx.log_limit != nullptr);
  auto impl = std::make_unique<Impl>(ctx, cq, shadow);
  ASSIGN_OR_RETURN(impl->control_fd, make_eventfd(0, EFD_NONBLOCK));
  int ep = ::epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) return fail_errno("epoll_create1", ctx.name);
  impl->epoll.reset(ep);
  TRY(epoll_watch(impl->epoll.get(), impl->control_fd.get(), kTagControl, true));
  Impl* p = impl.get();
  try {
    impl->thread = std::thread([p] { p->run(); });
  } catch (const std::system_error& e) {
    return fail_code(e.code().value(), "std::thread", ctx.name + ": NVMe I/O worker");
  }
  return std::unique_ptr<NvmeIoWorker>(new NvmeIoWorker(std::move(impl)));
}

NvmeIoWorker::~NvmeIoWorker() {
  if (!impl_ || !impl_->thread.joinable()) return;
  {
    std::lock_guard lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->cv.notify_all();
  impl_->wake();
  impl_->thread.join();
}

Result<void> NvmeIoWorker::add_sq(const SqConfig& sq, UniqueFd doorbell) {
  Impl& m = *impl_;
  const std::string what = m.ctx.name + ": SQ " + std::to_string(sq.qid);
  if (sq.cqid != m.cq_config.qid || sq.entries < 2 || !doorbell.valid())
    return fail("NvmeIoWorker::add_sq", what + ": bad configuration");
  {
    std::lock_guard lock(m.mu);
    if (m.sqs.count(sq.qid) != 0) return fail("NvmeIoWorker::add_sq", what + ": already served");
  }
  auto state = std::make_shared<NvmeSq>(*m.ctx.mem, sq);
  ASSIGN_OR_RETURN(auto engine,
                   m.ctx.engine_factory
                       ? m.ctx.engine_factory(m.ctx.disk->fd(), sq.entries)
                       : make_io_engine(m.ctx.config.engine, m.ctx.disk->fd(), sq.entries));
  ASSIGN_OR_RETURN(state->executor,
                   BlockExecutor::create(*m.ctx.disk, sq.entries, std::move(engine),
                                         m.ctx.executor_counters, m.ctx.log_limit, what));
  // Read without blocking: a spurious wakeup must not stall the worker.
  int fl = ::fcntl(doorbell.get(), F_GETFL);
  if (fl < 0 || ::fcntl(doorbell.get(), F_SETFL, fl | O_NONBLOCK) != 0)
    return fail_errno("fcntl", what + ": doorbell eventfd");
  state->doorbell = std::move(doorbell);
  state->slots.resize(sq.entries);
  state->free_slots.reserve(sq.entries);
  for (uint32_t i = sq.entries; i > 0; --i) state->free_slots.push_back(static_cast<uint16_t>(i - 1));
  TRY(epoll_watch(m.epoll.get(), state->doorbell.get(), kTagDoorbell | sq.qid, true));
  if (auto r = epoll_watch(m.epoll.get(), state->executor->completion_fd().get(),
                           kTagCompletion | sq.qid, true);
      !r) {
    (void)epoll_watch(m.epoll.get(), state->doorbell.get(), 0, false);
    return r;
  }
  {
    std::lock_guard lock(m.mu);
    m.sqs.emplace(sq.qid, std::move(state));
    ++m.generation;
  }
  m.wake();
  return {};
}

void NvmeIoWorker::remove_sq(uint16_t qid) {
  Impl& m = *impl_;
  std::unique_lock lk(m.mu);
  if (m.sqs.count(qid) == 0) return;
  if (!m.exited) {
    m.removing.push_back(qid);
    m.cv.notify_all();  // a parked worker
    m.wake();
    m.cv.wait(lk, [&] { return m.sqs.count(qid) == 0 || m.exited; });
  }
  // A worker that exited drained everything already: just forget the queue.
  if (auto it = m.sqs.find(qid); it != m.sqs.end()) {
    (void)epoll_watch(m.epoll.get(), it->second->doorbell.get(), 0, false);
    (void)epoll_watch(m.epoll.get(), it->second->executor->completion_fd().get(), 0, false);
    m.sqs.erase(it);
    ++m.generation;
  }
}

size_t NvmeIoWorker::sq_count() const {
  std::lock_guard lock(impl_->mu);
  return impl_->sqs.size();
}

BorrowedFd NvmeIoWorker::sq_doorbell_fd(uint16_t qid) const {
  std::lock_guard lock(impl_->mu);
  auto it = impl_->sqs.find(qid);
  return it == impl_->sqs.end() ? BorrowedFd(-1) : it->second->doorbell.borrow();
}

void NvmeIoWorker::sq_doorbell(uint16_t qid, uint32_t tail) {
  Impl& m = *impl_;
  {
    std::lock_guard lock(m.mu);
    auto it = m.sqs.find(qid);
    if (it == m.sqs.end()) return;  // the controller checks the queue exists
    NvmeSq& sq = *it->second;
    if (tail < sq.config.entries) {
      sq.mmio_tail.store(tail, std::memory_order_release);
      // Counted in doorbell_writes by the worker when it reads the eventfd.
      uint64_t one = 1;
      [[maybe_unused]] ssize_t n = ::write(sq.doorbell.get(), &one, sizeof one);
      return;
    }
  }
  m.counters(qid).doorbell_writes.fetch_add(1, std::memory_order_relaxed);
  m.invalid_doorbell(qid, tail, false);  // outside mu: the callback may call back into us
}

void NvmeIoWorker::cq_doorbell(uint32_t head) {
  Impl& m = *impl_;
  m.counters(m.cq_config.qid).doorbell_writes.fetch_add(1, std::memory_order_relaxed);
  if (head >= m.cq_config.entries) {
    m.invalid_doorbell(m.cq_config.qid, head, true);
    return;
  }
  m.cq_mmio_head.store(head, std::memory_order_seq_cst);
  // Pairs with the worker's store of waiting_for_room then re-read of cq_mmio_head.
  if (m.waiting_for_room.exchange(false, std::memory_order_seq_cst)) m.wake();
}

void NvmeIoWorker::set_shadow(const ShadowDoorbells& shadow) {
  {
    std::lock_guard lock(impl_->mu);
    impl_->new_shadow = shadow;
  }
  impl_->wake();
}

void NvmeIoWorker::pause() {
  Impl& m = *impl_;
  std::unique_lock lk(m.mu);
  if (m.exited) return;
  m.pause_requested = true;
  m.wake();
  m.cv.wait(lk, [&] { return m.parked || m.exited; });
}

void NvmeIoWorker::resume() {
  {
    std::lock_guard lock(impl_->mu);
    if (!impl_->pause_requested) return;
    impl_->pause_requested = false;
  }
  impl_->cv.notify_all();
}

void NvmeIoWorker::save(snap::ByteWriter& w) {
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  // A doorbell rung after the worker parked: the restored worker starts from these positions
  // (restore() sets the MMIO values to them), so what the host wrote must be in them.
  m.read_mmio_doorbells();
  m.cq.save(w);
  w.u16(static_cast<uint16_t>(m.sqs.size()));
  for (const auto& [qid, sq] : m.sqs) {
    w.u16(qid);
    sq->ring.save(w);
  }
}

Result<void> NvmeIoWorker::restore(snap::ByteReader& r) {
  Impl& m = *impl_;
  pause();  // the rings are the worker's; a fresh worker has nothing in flight
  std::lock_guard lock(m.mu);
  TRY(m.cq.restore(r));
  ASSIGN_OR_RETURN(uint16_t count, r.u16());
  if (count != m.sqs.size())
    return fail(r.what(), "CQ " + std::to_string(m.cq_config.qid) + ": " + std::to_string(count) +
                              " SQ(s) saved, " + std::to_string(m.sqs.size()) + " created");
  for (auto& [qid, sq] : m.sqs) {
    ASSIGN_OR_RETURN(uint16_t saved_qid, r.u16());
    if (saved_qid != qid)
      return fail(r.what(), "SQ " + std::to_string(saved_qid) + " saved, SQ " +
                                std::to_string(qid) + " created");
    TRY(sq->ring.restore(r));
    sq->mmio_tail.store(sq->ring.tail(), std::memory_order_release);
    sq->eventidx = UINT32_MAX;
  }
  m.cq_mmio_head.store(m.cq.head(), std::memory_order_release);
  return {};
}

void NvmeIoWorker::restore_cq_head(uint32_t head) {
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  if (m.shadow.enabled() || !m.cq.set_head(head)) return;
  m.cq_mmio_head.store(head, std::memory_order_seq_cst);
}

const CqConfig& NvmeIoWorker::cq() const { return impl_->cq_config; }

std::vector<SqConfig> NvmeIoWorker::sqs() const {
  std::lock_guard lock(impl_->mu);
  std::vector<SqConfig> out;
  out.reserve(impl_->sqs.size());
  for (const auto& [qid, sq] : impl_->sqs) out.push_back(sq->config);
  return out;
}

}  // namespace tern::nvme
