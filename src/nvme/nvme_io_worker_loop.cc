// NvmeIoWorker's thread: epoll over the control eventfd and each SQ's doorbell and executor
// completion fds; fetch / parse / submit / reap / post; EventIdx upkeep with shadow doorbells.
#include <pthread.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "nvme/nvme_io_worker_impl.h"
#include "base/cpu_affinity.h"

namespace tern::nvme {

namespace {
// Shadow re-check rounds in one process() call before returning to epoll.
constexpr unsigned kMaxRounds = 64;

// Reads (clears) a non-blocking eventfd; its value, 0 if it was not signalled.
uint64_t read_eventfd(int fd) {
  uint64_t v = 0;
  if (retry_eintr([&] { return ::read(fd, &v, sizeof v); }) != sizeof v) return 0;
  return v;
}
}  // namespace

Result<void> epoll_watch(int epoll_fd, int fd, uint64_t tag, bool add) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = tag;
  if (::epoll_ctl(epoll_fd, add ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, fd, &ev) != 0)
    return fail_errno("epoll_ctl", add ? "add" : "del");
  return {};
}

void NvmeIoWorker::Impl::run() {
  // ctx.name is the queue's name in the statistics ("nvme0/cq1"); comm holds 15 bytes.
  pthread_setname_np(pthread_self(), ctx.name.substr(0, 15).c_str());
  pin_this_thread(ThreadClass::kIo);  // --cpu-affinity io
  for (;;) {
    epoll_event evs[16];
    int n = ::epoll_wait(epoll.get(), evs, 16, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      spdlog::error("{}: CQ {}: epoll_wait: {}", ctx.name, cq_config.qid, std::strerror(errno));
      break;
    }
    // The control eventfd is cleared before the requests it announces are looked at (under mu
    // in control()): a wake after that is seen at the next epoll_wait, never lost.
    for (int i = 0; i < n; ++i)
      if (evs[i].data.u64 == kTagControl) read_eventfd(control_fd.get());
    // New SQs, removals, pause first: events of a queue not yet known stay readable.
    if (!control()) break;
    for (int i = 0; i < n; ++i) {
      uint64_t tag = evs[i].data.u64;
      uint64_t kind = tag & ~uint64_t{0xFFFF};
      auto qid = static_cast<uint16_t>(tag & 0xFFFF);
      if (kind == kTagControl) continue;
      for (auto& sq : active) {
        if (sq->config.qid != qid) continue;
        if (kind == kTagDoorbell) {
          sq->live = true;
          counters(qid).doorbell_writes.fetch_add(read_eventfd(sq->doorbell.get()),
                                                  std::memory_order_relaxed);
        } else {
          reap(*sq);
        }
      }
    }
    process();
  }
  // Stopping (or epoll failed): complete what is in flight (its buffers are guest memory).
  {
    std::lock_guard lock(mu);
    refresh_active();
  }
  for (auto& sq : active) drain(*sq);
  signal();
  std::lock_guard lock(mu);
  exited = true;
  cv.notify_all();
}

void NvmeIoWorker::Impl::refresh_active() {
  if (active_generation == generation && active.size() == sqs.size()) return;
  active.clear();
  for (auto& [qid, sq] : sqs) active.push_back(sq);
  active_generation = generation;
}

bool NvmeIoWorker::Impl::control() {
  std::unique_lock lk(mu);
  for (;;) {
    if (new_shadow) {
      shadow = *new_shadow;
      new_shadow.reset();
      for (auto& [qid, sq] : sqs) {
        sq->eventidx = UINT32_MAX;  // written afresh at the next process()
        sq->bad_shadow.reset();
        // Back to MMIO doorbells (none configured): start from where the shadow left the tail.
        sq->mmio_tail.store(sq->ring.tail(), std::memory_order_release);
      }
      cq_mmio_head.store(cq.head(), std::memory_order_seq_cst);
      bad_cq_shadow.reset();
    }
    refresh_active();
    remove_requested(lk);
    if (stopping) return false;
    if (!pause_requested) return true;
    // Pause: no new fetches; everything in flight completes and is posted, then we park.
    lk.unlock();
    for (auto& sq : active) drain(*sq);
    signal();
    lk.lock();
    read_mmio_doorbells();
    parked = true;
    cv.notify_all();
    while (pause_requested && !stopping) {
      remove_requested(lk);
      cv.wait(lk, [&] { return !pause_requested || stopping || !removing.empty(); });
    }
    parked = false;
    for (auto& [qid, sq] : sqs) sq->live = true;
    // Loop: apply what arrived while parked. Doorbells rung meanwhile left their eventfds
    // readable and their tails recorded: the next process() re-reads every tail.
  }
}

void NvmeIoWorker::Impl::read_mmio_doorbells() {
  // With shadow doorbells the host's values are in the shadow page: guest RAM, which a snapshot
  // carries, and the restored worker reads it at resume.
  if (shadow.enabled()) return;
  (void)cq.set_head(cq_mmio_head.load(std::memory_order_seq_cst));
  for (auto& [qid, sq] : sqs)
    (void)sq->ring.set_tail(sq->mmio_tail.load(std::memory_order_acquire));
}

void NvmeIoWorker::Impl::remove_requested(std::unique_lock<std::mutex>& lk) {
  while (!removing.empty()) {
    uint16_t qid = removing.back();
    removing.pop_back();
    auto it = sqs.find(qid);
    if (it == sqs.end()) continue;
    std::shared_ptr<NvmeSq> sq = it->second;
    lk.unlock();
    drain(*sq);  // its completions posted; unfetched entries dropped (§5.6)
    signal();
    lk.lock();
    (void)epoll_watch(epoll.get(), sq->doorbell.get(), 0, false);
    (void)epoll_watch(epoll.get(), sq->executor->completion_fd().get(), 0, false);
    sqs.erase(qid);
    ++generation;
    refresh_active();
    cv.notify_all();
  }
}

uint32_t NvmeIoWorker::Impl::cq_room() const {
  uint32_t f = cq.free();
  return f > reserved ? f - reserved : 0;
}

void NvmeIoWorker::Impl::refresh_cq_head() {
  if (!shadow.enabled()) {
    cq.set_head(cq_mmio_head.load(std::memory_order_seq_cst));
    return;
  }
  auto v = shadow.read_shadow(*ctx.mem, cq_config.qid, true);
  if (!v || *v == cq.head()) return;
  if (!cq.set_head(*v)) {
    if (bad_cq_shadow != *v) {
      bad_cq_shadow = *v;
      invalid_doorbell(cq_config.qid, *v, true);
    }
    return;
  }
  bad_cq_shadow.reset();
  // INTx: the controller lowers the line when the host has consumed every entry; this head
  // may never reach it as an MMIO doorbell.
  if (ctx.interrupts->level_triggered()) report_cq_head();
}

void NvmeIoWorker::Impl::report_cq_head() {
  // Entries in [head, tail) are unconsumed: written this lap (phase()) when head ≤ tail, the
  // ones from head to the ring's end in the previous lap otherwise.
  const uint32_t h = cq.head();
  ctx.interrupts->shadow_cq_head(cq_config.qid, h, h <= cq.tail() ? cq.phase() : !cq.phase());
}

void NvmeIoWorker::Impl::arm_cq_head_doorbell() {
  // EventIdx = the host's head now, so its next head update rings the CQ head doorbell (§5.8:
  // it rings when EventIdx lies in [old head, new head)). A head written before the host could
  // see the new EventIdx did not ring: read it (and so report it) and arm again.
  refresh_cq_head();
  for (unsigned round = 0; round < kMaxRounds; ++round) {
    const uint32_t h = cq.head();
    shadow.write_eventidx(*ctx.mem, cq_config.qid, true, h);
    refresh_cq_head();
    if (cq.head() == h) break;
  }
  // Even if the head did not move: the controller's copy may be stale (MSI-X was on until now).
  report_cq_head();
}

void NvmeIoWorker::Impl::refresh_tail(NvmeSq& sq) {
  if (!shadow.enabled()) {
    sq.ring.set_tail(sq.mmio_tail.load(std::memory_order_acquire));
    return;
  }
  auto v = shadow.read_shadow(*ctx.mem, sq.config.qid, false);
  if (!v || *v == sq.ring.tail()) return;
  if (!sq.ring.set_tail(*v)) {
    if (sq.bad_shadow != *v) {  // reported once per value, not at every re-read
      sq.bad_shadow = *v;
      invalid_doorbell(sq.config.qid, *v, false);
    }
    return;
  }
  sq.bad_shadow.reset();
  counters(sq.config.qid).shadow_updates.fetch_add(1, std::memory_order_relaxed);
}

void NvmeIoWorker::Impl::process() {
  waiting_for_room.store(false, std::memory_order_seq_cst);
  for (unsigned round = 0;; ++round) {
    if (round == kMaxRounds) {
      // A host that keeps the shadow tail moving: back to epoll now and then so pause and
      // removal requests are seen; the control eventfd brings us straight back.
      wake();
      break;
    }
    refresh_cq_head();
    for (auto& sq : active) {
      if (!sq->live) continue;
      refresh_tail(*sq);
      serve(*sq);
    }
    bool again = false;
    if (shadow.enabled()) {
      // EventIdx = the tail consumed, so the host rings for anything past it; then re-read the
      // shadow: a tail written before the host could see the new EventIdx did not ring (§5.8).
      bool wrote = false;
      for (auto& sq : active) {
        if (!sq->live || sq->eventidx == sq->ring.tail()) continue;
        sq->eventidx = sq->ring.tail();
        shadow.write_eventidx(*ctx.mem, sq->config.qid, false, sq->eventidx);
        wrote = true;
      }
      for (auto& sq : active) {
        if (!wrote) break;
        if (!sq->live) continue;
        auto v = shadow.read_shadow(*ctx.mem, sq->config.qid, false);
        if (v && *v < sq->config.entries && *v != sq->ring.tail()) again = true;
      }
    }
    bool blocked = false;
    for (auto& sq : active) blocked = blocked || (sq->ring.pending() > 0 && cq_room() == 0);
    if (blocked && !again) {
      // Waiting for the host to consume completions: make sure its next head update wakes us.
      waiting_for_room.store(true, std::memory_order_seq_cst);
      uint32_t h = cq.head();
      if (shadow.enabled()) {
        shadow.write_eventidx(*ctx.mem, cq_config.qid, true, h);
        auto v = shadow.read_shadow(*ctx.mem, cq_config.qid, true);
        again = v && *v < cq_config.entries && *v != h;
      } else {
        again = cq_mmio_head.load(std::memory_order_seq_cst) != h;
      }
      if (again) waiting_for_room.store(false, std::memory_order_seq_cst);
    }
    if (!again) break;
  }
  signal();
}

void NvmeIoWorker::Impl::serve(NvmeSq& sq) {
  const uint16_t qid = sq.config.qid;
  while (sq.ring.pending() > 0 && cq_room() > 0 && !sq.free_slots.empty() &&
         sq.executor->has_free_slot()) {
    SubmissionEntry e;
    if (!sq.ring.fetch(e)) break;
    counters(qid).commands.fetch_add(1, std::memory_order_relaxed);
    ++reserved;  // a completion slot for this command, whatever becomes of it
    auto req = parse_io_command(*ctx.mem, e, ctx.ns, ctx.limits);
    if (!req) {
      TERN_LOG_RATELIMITED(*ctx.log_limit, debug,
                           "{}: SQ {}: command {:#x} (cid {}) refused: SCT {} SC {:#x}", ctx.name,
                           qid, e.opcode, e.cid, req.error().sct(), req.error().sc());
      if (ctx.io_counters)
        ctx.io_counters->invalid_commands.fetch_add(1, std::memory_order_relaxed);
      post(sq, e.cid, req.error());
      continue;
    }
    if (req->nop) {
      post(sq, e.cid, kSuccess);
      continue;
    }
    uint16_t slot = sq.free_slots.back();
    sq.free_slots.pop_back();
    NvmeIoSlot& s = sq.slots[slot];
    s.cid = e.cid;
    s.kind = req->op.kind;
    bool data = s.kind == BlockOp::Kind::kRead || s.kind == BlockOp::Kind::kWrite;
    s.bytes = data ? req->op.len : 0;
    s.fua = req->fua;
    req->op.tag = slot;
    if (auto now = sq.executor->submit(std::move(req->op))) {
      on_done(sq, slot, *now);
    } else {
      sq.needs_flush = true;
    }
  }
  if (sq.needs_flush) {
    sq.needs_flush = false;
    sq.executor->flush();
  }
}

bool NvmeIoWorker::Impl::needs_flush_before_completion(const NvmeIoSlot& s) const {
  // Durable before completion, by a flush after the write: FUA on a Write or Write Zeroes
  // (§6.15, §6.16), and every write while the host has the volatile write cache off (WCE 0,
  // §5.21.1.6: it sends no flushes then). WCE is read when the write completes, not when it was
  // fetched: a write in flight while Set Features turned the cache off completes after the host
  // was told the cache is off, and the host will not flush it. cache=directsync writes already
  // are durable (O_DSYNC, and the executor syncs its Write Zeroes); cache=unsafe's flush does
  // nothing, as asked.
  if (s.flushed || ctx.disk->cache() == CacheMode::kDirectSync) return false;
  if (s.kind != BlockOp::Kind::kWrite && s.kind != BlockOp::Kind::kWriteZeroes) return false;
  return s.fua ||
         (ctx.volatile_write_cache && !ctx.volatile_write_cache->load(std::memory_order_acquire));
}

void NvmeIoWorker::Impl::on_done(NvmeSq& sq, uint16_t slot, BlockStatus status) {
  NvmeIoSlot& s = sq.slots[slot];
  const bool flush_after = status == BlockStatus::kOk && needs_flush_before_completion(s);
  if (flush_after && sq.executor->has_free_slot()) {
    s.flushed = true;
    BlockOp flush;
    flush.kind = BlockOp::Kind::kFlush;
    flush.tag = slot;
    if (auto now = sq.executor->submit(std::move(flush))) {
      on_done(sq, slot, *now);  // cache=unsafe: at once
    } else {
      sq.needs_flush = true;
    }
    return;
  }
  if (flush_after) status = BlockStatus::kHostError;  // no slot for the flush: cannot happen
  Status st = block_status_to_nvme(s.kind, status);
  if (status == BlockStatus::kOk && s.bytes > 0)
    counters(sq.config.qid).bytes.fetch_add(s.bytes, std::memory_order_relaxed);
  if (IoCommandCounters* io = ctx.io_counters) {
    auto add = [](std::atomic<uint64_t>& a, uint64_t n) {
      a.fetch_add(n, std::memory_order_relaxed);
    };
    if (status != BlockStatus::kOk) {
      add(io->io_errors, 1);
      if (st.sct() == static_cast<uint8_t>(StatusType::kMediaError)) add(io->media_errors, 1);
    } else {
      switch (s.kind) {
        case BlockOp::Kind::kRead: add(io->reads, 1), add(io->read_bytes, s.bytes); break;
        case BlockOp::Kind::kWrite: add(io->writes, 1), add(io->written_bytes, s.bytes); break;
        case BlockOp::Kind::kFlush: add(io->flushes, 1); break;
        case BlockOp::Kind::kDiscard: add(io->deallocates, 1); break;
        case BlockOp::Kind::kWriteZeroes: add(io->write_zeroes, 1); break;
      }
    }
  }
  uint16_t cid = s.cid;
  s = NvmeIoSlot{};
  sq.free_slots.push_back(slot);
  post(sq, cid, st);
}

void NvmeIoWorker::Impl::post(NvmeSq& sq, uint16_t cid, Status status) {
  CompletionEntry e{};
  e.sq_head = static_cast<uint16_t>(sq.ring.head());
  e.sq_id = sq.config.qid;
  e.cid = cid;
  e.status = status.field(false);  // the ring adds the phase tag
  cq.post(e);
  if (reserved > 0) --reserved;
  ++unsignalled;
  if (!status.ok()) counters(sq.config.qid).errors.fetch_add(1, std::memory_order_relaxed);
}

void NvmeIoWorker::Impl::signal() {
  if (unsignalled == 0) return;
  unsignalled = 0;
  if (!cq_config.interrupts_enabled) return;
  if (shadow.enabled() && ctx.interrupts->level_triggered()) arm_cq_head_doorbell();
  counters(cq_config.qid).interrupts.fetch_add(1, std::memory_order_relaxed);
  ctx.interrupts->signal(cq_config.qid, cq_config.vector);
}

void NvmeIoWorker::Impl::reap(NvmeSq& sq) {
  done.clear();
  sq.executor->reap(done);
  for (const auto& c : done) on_done(sq, static_cast<uint16_t>(c.tag), c.status);
  if (sq.needs_flush) {
    sq.needs_flush = false;
    sq.executor->flush();
  }
}

void NvmeIoWorker::Impl::drain(NvmeSq& sq) {
  std::vector<BlockCompletion> out;
  while (sq.in_flight() > 0) {
    out.clear();
    sq.executor->drain(out);
    for (const auto& c : out) on_done(sq, static_cast<uint16_t>(c.tag), c.status);
    if (sq.needs_flush) {
      sq.needs_flush = false;
      sq.executor->flush();
    } else if (out.empty()) {
      // The executor holds nothing yet we count commands in flight: a bug, not a reason to hang.
      spdlog::error("{}: SQ {}: {} command(s) lost in flight", ctx.name, sq.config.qid,
                    sq.in_flight());
      break;
    }
  }
}

}  // namespace tern::nvme
