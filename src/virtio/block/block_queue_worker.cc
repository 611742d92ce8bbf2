#include "virtio/block/block_queue_worker.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "base/checked.h"
#include "virtio/block/virtio_blk_spec.h"

namespace tern::virtio {

namespace {
constexpr uint64_t kTagKick = 1, kTagStop = 2, kTagIo = 3, kTagPause = 4;

// user_data = slot << 32 | op index within the request.
uint64_t user_data(uint16_t slot, uint32_t op) { return (uint64_t{slot} << 32) | op; }

void drain_eventfd(int fd) {
  uint64_t v;
  [[maybe_unused]] ssize_t n = ::read(fd, &v, sizeof v);
}
}  // namespace

BlockQueueWorker::BlockQueueWorker(BlockQueueContext ctx, UniqueFd kick)
    : ctx_(std::move(ctx)), vq_(*ctx_.mem, ctx_.queue, ctx_.features), kick_(std::move(kick)) {}

Result<std::unique_ptr<BlockQueueWorker>> BlockQueueWorker::start(BlockQueueContext ctx,
                                                                 UniqueFd kick,
                                                                 IoEngineKind engine) {
  std::unique_ptr<BlockQueueWorker> w(new BlockQueueWorker(std::move(ctx), std::move(kick)));
  TRY(w->vq_.validate());
  if (w->ctx_.engine_factory) {
    ASSIGN_OR_RETURN(w->engine_, w->ctx_.engine_factory(w->ctx_.disk->fd(), w->ctx_.queue.size));
  } else {
    ASSIGN_OR_RETURN(w->engine_, make_io_engine(engine, w->ctx_.disk->fd(), w->ctx_.queue.size));
  }
  if (w->ctx_.disk->direct()) {
    // The queue's whole bounce budget (docs/limits.md): BouncePool's default chunks.
    w->bounce_.emplace(
        std::max<size_t>(w->ctx_.disk->memory_alignment(), w->ctx_.disk->logical_block_size()));
  }
  ASSIGN_OR_RETURN(w->stop_, make_eventfd(0, EFD_NONBLOCK));
  ASSIGN_OR_RETURN(w->pause_, make_eventfd(0, EFD_NONBLOCK));
  // The kick eventfd is read without blocking: a spurious wakeup must not stall the worker.
  int fl = ::fcntl(w->kick_.get(), F_GETFL);
  if (fl < 0 || ::fcntl(w->kick_.get(), F_SETFL, fl | O_NONBLOCK) != 0)
    return fail_errno("fcntl", "queue kick eventfd");
  int ep = ::epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) return fail_errno("epoll_create1");
  w->epoll_.reset(ep);
  for (auto [fd, tag] : {std::pair{w->kick_.get(), kTagKick}, std::pair{w->stop_.get(), kTagStop},
                         std::pair{w->engine_->completion_fd().get(), kTagIo},
                         std::pair{w->pause_.get(), kTagPause}}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = tag;
    if (::epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) return fail_errno("epoll_ctl");
  }
  w->slots_.resize(w->ctx_.queue.size);
  for (uint16_t i = w->ctx_.queue.size; i > 0; --i) w->free_slots_.push_back(i - 1);
  w->thread_ = std::thread([p = w.get()] { p->run(); });
  return w;
}

BlockQueueWorker::~BlockQueueWorker() {
  if (thread_.joinable()) {
    {
      std::lock_guard lock(park_mu_);
      stopping_ = true;
    }
    park_cv_.notify_all();
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(stop_.get(), &one, sizeof one);
    thread_.join();
  }
  if (bounce_) ctx_.counters->bounce_bytes.fetch_sub(bounce_->allocated_bytes());
}

void BlockQueueWorker::run() {
  // A kick may have arrived before the eventfd was handed to us.
  process_queue();
  for (;;) {
    epoll_event evs[4];
    int n = ::epoll_wait(epoll_.get(), evs, 4, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      spdlog::error("{}: queue {}: epoll_wait: {}", ctx_.name, ctx_.index, std::strerror(errno));
      break;
    }
    bool stop = false, pause = false;
    for (int i = 0; i < n; ++i) {
      switch (evs[i].data.u64) {
        case kTagKick: drain_eventfd(kick_.get()); break;
        case kTagStop: stop = true; break;
        case kTagIo: handle_completions(); break;
        case kTagPause: drain_eventfd(pause_.get()); pause = true; break;
      }
    }
    if (stop) break;
    // Quiesce: no new requests until resumed (a kick drained above is re-checked then).
    if (pause && !park()) break;
    // Kicked, or slots were freed: serve the ring.
    process_queue();
  }
  // Stopping: finish what the engine holds (its buffers are guest memory) and publish it.
  drain_engine();
  std::lock_guard lock(park_mu_);
  exited_ = true;
  park_cv_.notify_all();
}

void BlockQueueWorker::drain_engine() {
  while (engine_->in_flight() > 0) {
    pollfd p{engine_->completion_fd().get(), POLLIN, 0};
    if (::poll(&p, 1, -1) < 0 && errno != EINTR) break;
    handle_completions();
  }
  publish();
}

void BlockQueueWorker::mark_broken(const std::string& why) {
  broken_ = true;
  BlockCounters::add(ctx_.counters->needs_reset);
  TERN_LOG_RATELIMITED(*ctx_.log_limit, warn, "{}: queue {}: {}; device needs reset", ctx_.name,
                       ctx_.index, why);
  ctx_.interrupt->set_needs_reset();
}

void BlockQueueWorker::process_queue() {
  while (!broken_) {
    while (!broken_ && !free_slots_.empty()) {
      PopResult p = vq_.pop();
      if (p.kind == PopResult::Kind::kEmpty) break;
      if (p.kind == PopResult::Kind::kFatal) {
        mark_broken(p.reason);
        break;
      }
      BlockCounters::add(ctx_.counters->requests);
      if (p.kind == PopResult::Kind::kMalformed) {
        BlockCounters::add(ctx_.counters->malformed_chains);
        TERN_LOG_RATELIMITED(*ctx_.log_limit, warn, "{}: queue {}: malformed chain: {}",
                             ctx_.name, ctx_.index, p.reason);
        complete(p.head, nullptr, 0, 0);
        continue;
      }
      serve(std::move(p.chain));
    }
    engine_->submit();
    publish();
    if (broken_ || free_slots_.empty()) return;  // completions will call us again
    auto more = vq_.enable_notification();
    if (!more) {
      mark_broken(more.error().message());
      return;
    }
    if (!*more) return;
  }
}

void BlockQueueWorker::complete(uint16_t head, uint8_t* status, uint8_t value, uint32_t used_len) {
  if (status != nullptr) *status = value;
  if (auto r = vq_.add_used(head, used_len); !r) mark_broken(r.error().message());
}

void BlockQueueWorker::publish() {
  if (broken_) return;
  auto notify = vq_.publish_used();
  if (!notify) {
    mark_broken(notify.error().message());
    return;
  }
  if (*notify) ctx_.interrupt->signal_used_queue(ctx_.index);
}

void BlockQueueWorker::serve(DescriptorChain chain) {
  BlockRequest req = parse_block_request(chain, ctx_.limits);
  auto& c = *ctx_.counters;
  switch (req.op) {
    case BlockRequest::Op::kNone:
      if (req.status == nullptr) {
        BlockCounters::add(c.malformed_chains);
        complete(req.head, nullptr, 0, 0);
      } else {
        BlockCounters::add(req.status_value == VIRTIO_BLK_S_UNSUPP ? c.unsupp : c.ioerr);
        if (req.over_limits) BlockCounters::add(c.over_limits);
        complete(req.head, req.status, req.status_value, 1);
      }
      TERN_LOG_RATELIMITED(*ctx_.log_limit, debug, "{}: queue {}: request type {} refused: {}",
                           ctx_.name, ctx_.index, req.type, req.problem);
      return;
    case BlockRequest::Op::kGetId: {
      uint8_t id[VIRTIO_BLK_ID_BYTES] = {};
      std::memcpy(id, ctx_.serial.data(), std::min<size_t>(ctx_.serial.size(), sizeof id));
      size_t done = 0;
      for (const auto& v : req.data) {
        std::memcpy(v.iov_base, id + done, v.iov_len);
        done += v.iov_len;
      }
      BlockCounters::add(c.get_ids);
      complete(req.head, req.status, VIRTIO_BLK_S_OK, req.success_used_len());
      return;
    }
    case BlockRequest::Op::kFlush:
      if (ctx_.disk->cache() == CacheMode::kUnsafe) {
        BlockCounters::add(c.flushes);
        complete(req.head, req.status, VIRTIO_BLK_S_OK, 1);
        return;
      }
      break;
    case BlockRequest::Op::kIn:
    case BlockRequest::Op::kOut:
      if (req.len == 0) {
        complete(req.head, req.status, VIRTIO_BLK_S_OK, req.success_used_len());
        return;
      }
      if (ctx_.disk->direct() &&
          (req.offset % ctx_.disk->logical_block_size() != 0 ||
           req.len % ctx_.disk->logical_block_size() != 0)) {
        // TODO(blk): read-modify-write for sub-block requests on 4K-sector O_DIRECT images; the
        // device advertises blk_size so well-behaved drivers never send them.
        BlockCounters::add(c.ioerr);
        complete(req.head, req.status, VIRTIO_BLK_S_IOERR, 1);
        return;
      }
      break;
    case BlockRequest::Op::kDiscard:
    case BlockRequest::Op::kWriteZeroes:
      if (req.ranges.empty()) {
        BlockCounters::add(req.op == BlockRequest::Op::kDiscard ? c.discards : c.write_zeroes);
        complete(req.head, req.status, VIRTIO_BLK_S_OK, 1);
        return;
      }
      break;
  }
  uint16_t slot = free_slots_.back();
  free_slots_.pop_back();
  slots_[slot] = InFlight{};
  slots_[slot].req = std::move(req);
  start_io(slot);
}

void BlockQueueWorker::start_io(uint16_t slot) {
  InFlight& f = slots_[slot];
  BlockRequest& r = f.req;
  IoOp op;
  op.user_data = user_data(slot, 0);
  switch (r.op) {
    case BlockRequest::Op::kFlush:
      op.kind = IoOp::Kind::kFdatasync;
      f.pending_ops = 1;
      engine_->enqueue(op);
      return;
    case BlockRequest::Op::kIn:
    case BlockRequest::Op::kOut: {
      op.kind = r.op == BlockRequest::Op::kIn ? IoOp::Kind::kRead : IoOp::Kind::kWrite;
      op.offset = r.offset;
      op.len = r.len;
      op.iov = r.data.data();
      op.iovcnt = static_cast<int>(r.data.size());
      if (ctx_.disk->direct()) {
        uint32_t ma = ctx_.disk->memory_alignment(), lbs = ctx_.disk->logical_block_size();
        bool aligned = std::all_of(r.data.begin(), r.data.end(), [&](const iovec& v) {
          return reinterpret_cast<uintptr_t>(v.iov_base) % ma == 0 && v.iov_len % lbs == 0;
        });
        if (!aligned) {
          // O_DIRECT needs aligned memory: go through an aligned copy (never assume the guest's
          // buffers are aligned), within the queue's fixed bounce budget.
          BlockCounters::add(ctx_.counters->bounced);
          start_bounced(slot);
          return;
        }
      }
      f.pending_ops = 1;
      engine_->enqueue(op);
      return;
    }
    case BlockRequest::Op::kDiscard:
    case BlockRequest::Op::kWriteZeroes:
      f.pending_ops = static_cast<unsigned>(r.ranges.size());
      for (uint32_t i = 0; i < r.ranges.size(); ++i) {
        IoOp z;
        z.kind = IoOp::Kind::kFallocate;
        z.offset = r.ranges[i].offset;
        z.len = r.ranges[i].len;
        z.fallocate_mode = (r.op == BlockRequest::Op::kDiscard || r.ranges[i].unmap)
                               ? FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
                               : FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE;
        z.user_data = user_data(slot, i);
        engine_->enqueue(z);
      }
      return;
    default:
      TERN_CHECK(false);
  }
}

namespace {
// Copies n bytes between `buf` and the bytes [skip, skip + n) of the iovecs `v`.
void copy_iov(const std::vector<iovec>& v, uint64_t skip, uint8_t* buf, uint64_t n, bool to_iov) {
  for (const auto& e : v) {
    if (n == 0) break;
    if (skip >= e.iov_len) {
      skip -= e.iov_len;
      continue;
    }
    size_t take = static_cast<size_t>(std::min<uint64_t>(e.iov_len - skip, n));
    uint8_t* p = static_cast<uint8_t*>(e.iov_base) + skip;
    if (to_iov)
      std::memcpy(p, buf, take);
    else
      std::memcpy(buf, p, take);
    buf += take;
    n -= take;
    skip = 0;
  }
}
}  // namespace

void BlockQueueWorker::start_bounced(uint16_t slot) {
  InFlight& f = slots_[slot];
  size_t before = bounce_->allocated_bytes();
  f.bounce = bounce_->acquire();
  BlockCounters::add(ctx_.counters->bounce_bytes, bounce_->allocated_bytes() - before);
  if (f.bounce == nullptr) {
    if (bounce_->in_use() > 0) {
      // The budget is spent: wait for a chunk (finish() hands it over in order).
      BlockCounters::add(ctx_.counters->bounce_waits);
      bounce_waiters_.push_back(slot);
      return;
    }
    // Nothing bounced and still no memory: a host failure.
    f.pending_ops = 0;
    f.failed = f.host_error = true;
    finish(slot);
    return;
  }
  start_piece(slot);
}

void BlockQueueWorker::start_piece(uint16_t slot) {
  InFlight& f = slots_[slot];
  BlockRequest& r = f.req;
  f.piece = std::min<uint64_t>(bounce_->chunk_bytes(), r.len - f.bounce_done);
  if (r.op == BlockRequest::Op::kOut) copy_iov(r.data, f.bounce_done, f.bounce, f.piece, false);
  f.bounce_iov = iovec{f.bounce, static_cast<size_t>(f.piece)};
  IoOp op;
  op.kind = r.op == BlockRequest::Op::kIn ? IoOp::Kind::kRead : IoOp::Kind::kWrite;
  op.offset = r.offset + f.bounce_done;
  op.len = f.piece;
  op.iov = &f.bounce_iov;
  op.iovcnt = 1;
  op.user_data = user_data(slot, 0);
  f.pending_ops = 1;
  engine_->enqueue(op);
}

bool BlockQueueWorker::advance_bounced(uint16_t slot) {
  InFlight& f = slots_[slot];
  BlockRequest& r = f.req;
  if (r.op == BlockRequest::Op::kIn) copy_iov(r.data, f.bounce_done, f.bounce, f.piece, true);
  f.bounce_done += f.piece;
  if (f.bounce_done >= r.len) return false;
  start_piece(slot);
  return true;
}

void BlockQueueWorker::handle_completions() {
  completions_.clear();
  engine_->reap(completions_);
  for (const auto& c : completions_) {
    auto slot = static_cast<uint16_t>(c.user_data >> 32);
    auto op_index = static_cast<uint32_t>(c.user_data);
    if (slot >= slots_.size() || slots_[slot].pending_ops == 0) continue;  // cannot happen
    InFlight& f = slots_[slot];
    BlockRequest& r = f.req;
    bool ok = c.result >= 0;
    bool rw = r.op == BlockRequest::Op::kIn || r.op == BlockRequest::Op::kOut;
    if (rw && static_cast<uint64_t>(c.result) != (f.bounce != nullptr ? f.piece : r.len))
      ok = false;
    if (!ok && c.result == -EOPNOTSUPP && r.op == BlockRequest::Op::kWriteZeroes &&
        op_index < r.ranges.size() && !r.ranges[op_index].unmap) {
      // No FALLOC_FL_ZERO_RANGE here (e.g. tmpfs): a punched hole reads back as zeroes too.
      r.ranges[op_index].unmap = true;
      IoOp z;
      z.kind = IoOp::Kind::kFallocate;
      z.offset = r.ranges[op_index].offset;
      z.len = r.ranges[op_index].len;
      z.fallocate_mode = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
      z.user_data = c.user_data;
      engine_->enqueue(z);
      continue;
    }
    if (!ok) {
      f.failed = f.host_error = true;
      TERN_LOG_RATELIMITED(*ctx_.log_limit, warn, "{}: queue {}: host I/O error on {}: {}",
                           ctx_.name, ctx_.index, ctx_.disk->path(),
                           c.result < 0 ? std::strerror(static_cast<int>(-c.result))
                                        : "short transfer");
    }
    if (ok && rw && f.bounce != nullptr && advance_bounced(slot)) continue;  // next piece
    if (--f.pending_ops > 0) continue;
    bool zeroing = r.op == BlockRequest::Op::kDiscard || r.op == BlockRequest::Op::kWriteZeroes;
    if (zeroing && !f.failed && !f.synced && ctx_.disk->cache() == CacheMode::kDirectSync) {
      // directsync promises "durable on completion"; O_DSYNC does not cover fallocate().
      f.synced = true;
      f.pending_ops = 1;
      IoOp sync;
      sync.kind = IoOp::Kind::kFdatasync;
      sync.user_data = user_data(slot, UINT32_MAX);
      engine_->enqueue(sync);
      continue;
    }
    finish(slot);
  }
  engine_->submit();
  publish();
}

void BlockQueueWorker::finish(uint16_t slot) {
  InFlight& f = slots_[slot];
  BlockRequest& r = f.req;
  auto& c = *ctx_.counters;
  if (f.failed) {
    BlockCounters::add(c.ioerr);
    if (f.host_error) BlockCounters::add(c.host_io_errors);
    complete(r.head, r.status, VIRTIO_BLK_S_IOERR, 1);
  } else {
    switch (r.op) {
      case BlockRequest::Op::kIn:
        BlockCounters::add(c.reads);
        BlockCounters::add(c.bytes_read, r.len);
        break;
      case BlockRequest::Op::kOut:
        BlockCounters::add(c.writes);
        BlockCounters::add(c.bytes_written, r.len);
        break;
      case BlockRequest::Op::kFlush: BlockCounters::add(c.flushes); break;
      case BlockRequest::Op::kDiscard: BlockCounters::add(c.discards); break;
      case BlockRequest::Op::kWriteZeroes: BlockCounters::add(c.write_zeroes); break;
      default: break;
    }
    complete(r.head, r.status, VIRTIO_BLK_S_OK, r.success_used_len());
  }
  bool released = f.bounce != nullptr;
  if (released) bounce_->release(f.bounce);
  f = InFlight{};
  free_slots_.push_back(slot);
  if (released && !bounce_waiters_.empty()) {
    uint16_t next = bounce_waiters_.front();
    bounce_waiters_.pop_front();
    start_bounced(next);
  }
}

}  // namespace tern::virtio
