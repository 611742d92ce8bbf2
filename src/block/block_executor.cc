#include "block/block_executor.h"

#include <linux/falloc.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

namespace tern {

namespace {
// IoOp user_data = slot << 32 | op index within the BlockOp.
uint64_t user_data(uint16_t slot, uint32_t op) { return (uint64_t{slot} << 32) | op; }

bool is_rw(BlockOp::Kind k) { return k == BlockOp::Kind::kRead || k == BlockOp::Kind::kWrite; }

// Copies n bytes between `buf` and the bytes [skip, skip + n) of the iovecs `v` (to_iov with a
// null `buf`: zeros).
void copy_iov(const std::vector<iovec>& v, uint64_t skip, uint8_t* buf, uint64_t n, bool to_iov) {
  for (const auto& e : v) {
    if (n == 0) break;
    if (skip >= e.iov_len) {
      skip -= e.iov_len;
      continue;
    }
    size_t take = static_cast<size_t>(std::min<uint64_t>(e.iov_len - skip, n));
    uint8_t* p = static_cast<uint8_t*>(e.iov_base) + skip;
    if (to_iov && buf == nullptr)
      std::memset(p, 0, take);
    else if (to_iov)
      std::memcpy(p, buf, take);
    else
      std::memcpy(buf, p, take);
    if (buf != nullptr) buf += take;
    n -= take;
    skip = 0;
  }
}
// True if `op` (a write) would leave the qcow2 magic in bytes 0..3 of the disk: the bytes it
// writes there over the ones the file has. Only called for a probed raw disk, where such a write
// would make the next start (or restore) serve the guest's bytes as a qcow2 image.
bool writes_qcow2_magic(const BlockOp& op, int fd) {
  constexpr uint8_t kMagic[4] = {'Q', 'F', 'I', 0xfb};
  if (op.offset >= 4 || op.len == 0) return false;
  uint8_t head[4] = {};
  const uint64_t from = op.offset, n = std::min<uint64_t>(4 - from, op.len);
  if (from > 0 || n < 4) {
    // A sub-sector write (never O_DIRECT: submit() refused it): the rest from the file.
    if (::pread(fd, head, 4, 0) != 4) return false;  // a file this short is no qcow2 image
  }
  copy_iov(op.iov, 0, head + from, n, false);
  return std::memcmp(head, kMagic, 4) == 0;
}

}  // namespace

BlockExecutor::BlockExecutor(const DiskImage& disk, std::unique_ptr<IoEngine> engine,
                             BlockExecutorCounters* counters, RateLimit* log_limit,
                             std::string log_prefix)
    : disk_(disk),
      engine_(std::move(engine)),
      counters_(counters),
      log_limit_(log_limit),
      log_prefix_(std::move(log_prefix)) {}

Result<std::unique_ptr<BlockExecutor>> BlockExecutor::create(const DiskImage& disk, unsigned depth,
                                                             std::unique_ptr<IoEngine> engine,
                                                             BlockExecutorCounters* counters,
                                                             RateLimit* log_limit,
                                                             std::string log_prefix) {
  if (!engine) return fail("block executor", "no I/O engine");
  if (depth == 0 || depth > 65536) return fail("block executor", "depth not in 1..65536");
  std::unique_ptr<BlockExecutor> e(new BlockExecutor(disk, std::move(engine), counters, log_limit,
                                                     std::move(log_prefix)));
  if (disk.direct()) {
    // The queue's whole bounce budget (docs/limits.md): BouncePool's default chunks.
    e->bounce_.emplace(std::max<size_t>(disk.memory_alignment(), disk.logical_block_size()));
  }
  e->slots_.resize(depth);
  for (unsigned i = depth; i > 0; --i) e->free_slots_.push_back(static_cast<uint16_t>(i - 1));
  return e;
}

BlockExecutor::~BlockExecutor() {
  if (bounce_) counters_->bounce_bytes.fetch_sub(bounce_->allocated_bytes());
}

std::optional<BlockStatus> BlockExecutor::submit(BlockOp op) {
  TERN_CHECK(!free_slots_.empty());
  switch (op.kind) {
    case BlockOp::Kind::kFlush:
      if (disk_.cache() == CacheMode::kUnsafe) return BlockStatus::kOk;
      break;
    case BlockOp::Kind::kRead:
    case BlockOp::Kind::kWrite:
      if (disk_.direct() && (op.offset % disk_.logical_block_size() != 0 ||
                             op.len % disk_.logical_block_size() != 0)) {
        // TODO(blk): read-modify-write for sub-block requests on 4K-sector O_DIRECT images;
        // frontends advertise the block size so well-behaved drivers never send them.
        return BlockStatus::kIoError;
      }
      // A probed raw disk never gets the qcow2 magic written by its guest (QEMU refuses such
      // writes the same way): the next probe would serve it as qcow2, its header the guest's.
      if (op.kind == BlockOp::Kind::kWrite && disk_.format_probed() &&
          writes_qcow2_magic(op, disk_.fd().get())) {
        TERN_LOG_RATELIMITED(*log_limit_, warn,
                             "{}: write of a qcow2 header to a raw disk whose format was probed "
                             "refused (give --disk format=raw to allow it)",
                             log_prefix_);
        return BlockStatus::kIoError;
      }
      break;
    case BlockOp::Kind::kDiscard:
    case BlockOp::Kind::kWriteZeroes:
      if (op.ranges.empty()) return BlockStatus::kOk;
      break;
  }
  uint16_t slot = free_slots_.back();
  free_slots_.pop_back();
  slots_[slot] = InFlight{};
  slots_[slot].op = std::move(op);
  uint64_t tag = slots_[slot].op.tag;
  // start_io() may finish the op at once (no bounce memory): catch that completion here.
  std::vector<BlockCompletion> now;
  out_ = &now;
  start_io(slot);
  out_ = nullptr;
  for (const auto& c : now)
    if (c.tag == tag) return c.status;
  return std::nullopt;
}

void BlockExecutor::flush() { engine_->submit(); }

void BlockExecutor::start_io(uint16_t slot) {
  InFlight& f = slots_[slot];
  BlockOp& r = f.op;
  IoOp op;
  op.user_data = user_data(slot, 0);
  switch (r.kind) {
    case BlockOp::Kind::kFlush:
      op.kind = IoOp::Kind::kFdatasync;
      f.pending_ops = 1;
      engine_->enqueue(op);
      return;
    case BlockOp::Kind::kRead:
    case BlockOp::Kind::kWrite: {
      if (disk_.qcow2() != nullptr) {
        start_qcow2(slot);
        return;
      }
      op.kind = r.kind == BlockOp::Kind::kRead ? IoOp::Kind::kRead : IoOp::Kind::kWrite;
      op.offset = r.offset;
      op.len = r.len;
      op.iov = r.iov.data();
      op.iovcnt = static_cast<int>(r.iov.size());
      if (disk_.direct()) {
        uint32_t ma = disk_.memory_alignment(), lbs = disk_.logical_block_size();
        bool aligned = std::all_of(r.iov.begin(), r.iov.end(), [&](const iovec& v) {
          return reinterpret_cast<uintptr_t>(v.iov_base) % ma == 0 && v.iov_len % lbs == 0;
        });
        if (!aligned) {
          // O_DIRECT needs aligned memory: go through an aligned copy (never assume the guest's
          // buffers are aligned), within the fixed bounce budget.
          counters_->bounced.fetch_add(1, std::memory_order_relaxed);
          start_bounced(slot);
          return;
        }
      }
      f.pending_ops = 1;
      engine_->enqueue(op);
      return;
    }
    case BlockOp::Kind::kDiscard:
    case BlockOp::Kind::kWriteZeroes:
      if (disk_.qcow2() != nullptr) {
        zero_qcow2(slot);
        return;
      }
      f.pending_ops = static_cast<unsigned>(r.ranges.size());
      for (uint32_t i = 0; i < r.ranges.size(); ++i) {
        IoOp z;
        z.kind = IoOp::Kind::kFallocate;
        z.offset = r.ranges[i].offset;
        z.len = r.ranges[i].len;
        z.fallocate_mode = (r.kind == BlockOp::Kind::kDiscard || r.ranges[i].unmap)
                               ? FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
                               : FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE;
        z.user_data = user_data(slot, i);
        engine_->enqueue(z);
      }
      return;
  }
}

void BlockExecutor::start_qcow2(uint16_t slot) {
  InFlight& f = slots_[slot];
  BlockOp& r = f.op;
  Qcow2Image& q = *disk_.qcow2();
  const bool write = r.kind == BlockOp::Kind::kWrite;
  auto host_failure = [&](const Error& e) {
    f.failed = f.host_error = true;
    TERN_LOG_RATELIMITED(*log_limit_, warn, "{}: qcow2 {} at {}: {}", log_prefix_,
                         write ? "write" : "read", r.offset, e.message());
  };
  std::vector<Qcow2Extent> extents;
  if (auto ok = q.map(r.offset, r.len, write, extents); !ok) {
    host_failure(ok.error());
    finish(slot);
    return;
  }
  // O_DIRECT needs aligned memory and host offsets: anything else goes the synchronous
  // (buffered) way instead of through the bounce pool.
  const uint32_t lbs = disk_.logical_block_size(), ma = disk_.memory_alignment();
  const bool mem_ok =
      !disk_.direct() || std::all_of(r.iov.begin(), r.iov.end(), [&](const iovec& v) {
        return reinterpret_cast<uintptr_t>(v.iov_base) % ma == 0 && v.iov_len % lbs == 0;
      });
  std::vector<uint8_t> buf;
  for (const Qcow2Extent& e : extents) {
    const uint64_t skip = e.guest_off - r.offset;
    if (e.direct && mem_ok && (!disk_.direct() || (e.host % lbs == 0 && e.len % lbs == 0))) {
      std::vector<iovec> slice;
      uint64_t s = skip, n = e.len;
      for (const iovec& v : r.iov) {
        if (n == 0) break;
        if (s >= v.iov_len) {
          s -= v.iov_len;
          continue;
        }
        const size_t take = static_cast<size_t>(std::min<uint64_t>(v.iov_len - s, n));
        slice.push_back(iovec{static_cast<uint8_t*>(v.iov_base) + s, take});
        n -= take;
        s = 0;
      }
      IoOp op;
      op.kind = write ? IoOp::Kind::kWrite : IoOp::Kind::kRead;
      op.offset = e.host;
      op.len = e.len;
      op.iov = slice.data();
      op.iovcnt = static_cast<int>(slice.size());
      op.user_data = user_data(slot, static_cast<uint32_t>(f.pieces.size()));
      f.pieces.push_back(std::move(slice));  // the vector's buffer (op.iov) does not move
      f.piece_lens.push_back(e.len);
      ++f.pending_ops;
      engine_->enqueue(op);
      continue;
    }
    if (e.zero) {  // reads as zeros: no I/O
      copy_iov(r.iov, skip, nullptr, e.len, true);
      continue;
    }
    // Synchronous, through a buffer of at most 1 MiB.
    for (uint64_t done = 0; done < e.len && !f.failed;) {
      const uint64_t n = std::min<uint64_t>(e.len - done, 1u << 20);
      buf.resize(n);
      Result<void> ok;
      if (write) {
        copy_iov(r.iov, skip + done, buf.data(), n, false);
        ok = q.write_sync(e.guest_off + done, buf.data(), n);
      } else {
        ok = q.read_sync(e.guest_off + done, buf.data(), n);
        if (ok) copy_iov(r.iov, skip + done, buf.data(), n, true);
      }
      if (!ok) host_failure(ok.error());
      done += n;
    }
  }
  if (f.pending_ops == 0) finish(slot);
}

void BlockExecutor::zero_qcow2(uint16_t slot) {
  InFlight& f = slots_[slot];
  Qcow2Image& q = *disk_.qcow2();
  for (const BlockRange& range : f.op.ranges) {
    auto ok = q.write_zeroes(range.offset, range.len);
    if (!ok) {
      f.failed = f.host_error = true;
      TERN_LOG_RATELIMITED(*log_limit_, warn, "{}: qcow2 zeroing at {}: {}", log_prefix_,
                           range.offset, ok.error().message());
      break;
    }
  }
  if (!f.failed && disk_.cache() == CacheMode::kDirectSync) {
    if (auto ok = q.flush(); !ok) f.failed = f.host_error = true;
  }
  finish(slot);
}

void BlockExecutor::start_bounced(uint16_t slot) {
  InFlight& f = slots_[slot];
  size_t before = bounce_->allocated_bytes();
  f.bounce = bounce_->acquire();
  counters_->bounce_bytes.fetch_add(bounce_->allocated_bytes() - before,
                                    std::memory_order_relaxed);
  if (f.bounce == nullptr) {
    if (bounce_->in_use() > 0) {
      // The budget is spent: wait for a chunk (finish() hands it over in order).
      counters_->bounce_waits.fetch_add(1, std::memory_order_relaxed);
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

void BlockExecutor::start_piece(uint16_t slot) {
  InFlight& f = slots_[slot];
  BlockOp& r = f.op;
  f.piece = std::min<uint64_t>(bounce_->chunk_bytes(), r.len - f.bounce_done);
  if (r.kind == BlockOp::Kind::kWrite) copy_iov(r.iov, f.bounce_done, f.bounce, f.piece, false);
  f.bounce_iov = iovec{f.bounce, static_cast<size_t>(f.piece)};
  IoOp op;
  op.kind = r.kind == BlockOp::Kind::kRead ? IoOp::Kind::kRead : IoOp::Kind::kWrite;
  op.offset = r.offset + f.bounce_done;
  op.len = f.piece;
  op.iov = &f.bounce_iov;
  op.iovcnt = 1;
  op.user_data = user_data(slot, 0);
  f.pending_ops = 1;
  engine_->enqueue(op);
}

bool BlockExecutor::advance_bounced(uint16_t slot) {
  InFlight& f = slots_[slot];
  BlockOp& r = f.op;
  if (r.kind == BlockOp::Kind::kRead) copy_iov(r.iov, f.bounce_done, f.bounce, f.piece, true);
  f.bounce_done += f.piece;
  if (f.bounce_done >= r.len) return false;
  start_piece(slot);
  return true;
}

void BlockExecutor::reap(std::vector<BlockCompletion>& out) {
  out_ = &out;
  io_.clear();
  engine_->reap(io_);
  for (const auto& c : io_) {
    auto slot = static_cast<uint16_t>(c.user_data >> 32);
    auto op_index = static_cast<uint32_t>(c.user_data);
    if (slot >= slots_.size() || slots_[slot].pending_ops == 0) continue;  // cannot happen
    InFlight& f = slots_[slot];
    BlockOp& r = f.op;
    bool ok = c.result >= 0;
    bool rw = is_rw(r.kind);
    uint64_t expected = f.bounce != nullptr ? f.piece : r.len;
    if (!f.piece_lens.empty()) expected = op_index < f.piece_lens.size() ? f.piece_lens[op_index] : 0;
    if (rw && static_cast<uint64_t>(c.result) != expected) ok = false;
    if (!ok && c.result == -EOPNOTSUPP && r.kind == BlockOp::Kind::kWriteZeroes &&
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
      TERN_LOG_RATELIMITED(*log_limit_, warn, "{}: host I/O error on {}: {}", log_prefix_,
                           disk_.path(),
                           c.result < 0 ? std::strerror(static_cast<int>(-c.result))
                                        : "short transfer");
    }
    if (ok && rw && f.bounce != nullptr && advance_bounced(slot)) continue;  // next piece
    if (--f.pending_ops > 0) continue;
    bool zeroing = r.kind == BlockOp::Kind::kDiscard || r.kind == BlockOp::Kind::kWriteZeroes;
    if (zeroing && !f.failed && !f.synced && disk_.cache() == CacheMode::kDirectSync) {
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
  out_ = nullptr;
}

void BlockExecutor::drain(std::vector<BlockCompletion>& out) {
  // Returns only with nothing in flight: the caller then parks the queue (a snapshot saves ring
  // positions that must describe every request) or lets the guest buffers go. Giving up early
  // would leave a request taken from the ring but never completed, its notification held.
  while (engine_->in_flight() > 0) {
    pollfd p{engine_->completion_fd().get(), POLLIN, 0};
    if (::poll(&p, 1, -1) < 0 && errno != EINTR) {
      // poll() itself failed (ENOMEM; EINVAL once RLIMIT_NOFILE is below 1): the completions
      // still arrive. Look for them every millisecond instead of waiting to be told.
      const int e = errno;
      TERN_LOG_RATELIMITED(*log_limit_, warn, "{}: draining: poll: {}; checking every 1 ms",
                           log_prefix_, std::strerror(e));
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    reap(out);
  }
}

void BlockExecutor::finish(uint16_t slot) {
  InFlight& f = slots_[slot];
  BlockStatus status = !f.failed      ? BlockStatus::kOk
                       : f.host_error ? BlockStatus::kHostError
                                      : BlockStatus::kIoError;
  TERN_CHECK(out_ != nullptr);
  out_->push_back(BlockCompletion{f.op.tag, status});
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

}  // namespace tern
