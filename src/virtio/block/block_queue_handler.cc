#include "virtio/block/block_queue_handler.h"

#include <algorithm>
#include <cstring>

#include "virtio/block/virtio_blk_spec.h"

namespace tern::virtio {

namespace {
constexpr uint32_t kTagIo = 1;

BlockOp::Kind op_kind(BlockRequest::Op op) {
  switch (op) {
    case BlockRequest::Op::kIn: return BlockOp::Kind::kRead;
    case BlockRequest::Op::kOut: return BlockOp::Kind::kWrite;
    case BlockRequest::Op::kFlush: return BlockOp::Kind::kFlush;
    case BlockRequest::Op::kDiscard: return BlockOp::Kind::kDiscard;
    case BlockRequest::Op::kWriteZeroes: return BlockOp::Kind::kWriteZeroes;
    default: TERN_CHECK(false);
  }
  return BlockOp::Kind::kRead;
}
}  // namespace

BlockQueueHandler::BlockQueueHandler(BlockCounters* counters, BlockLimits limits,
                                     std::string serial, std::unique_ptr<BlockExecutor> executor,
                                     unsigned depth)
    : counters_(counters),
      limits_(limits),
      serial_(std::move(serial)),
      executor_(std::move(executor)),
      pending_(depth) {
  for (unsigned i = depth; i > 0; --i) free_.push_back(static_cast<uint16_t>(i - 1));
}

std::vector<std::pair<BorrowedFd, uint32_t>> BlockQueueHandler::fds() {
  return {{executor_->completion_fd(), kTagIo}};
}

bool BlockQueueHandler::ready(QueueWorker&) {
  return !free_.empty() && executor_->has_free_slot();
}

void BlockQueueHandler::complete(QueueWorker& w, uint16_t head, uint8_t* status, uint8_t value,
                                 uint32_t used_len, uint64_t bytes, bool error) {
  if (status != nullptr) *status = value;
  w.complete(head, used_len, bytes, error);
}

void BlockQueueHandler::refuse(QueueWorker& w, uint16_t head) {
  auto tail = w.refused_tail(head);
  if (!tail) {
    w.mark_unanswerable("malformed request (head " + std::to_string(head) +
                  ") without a status byte to answer it");
    return;
  }
  // §5.2.6: the status is the last byte of the chain, device-writable.
  BlockCounters::add(counters_->ioerr);
  complete(w, head, tail->host.data() + tail->host.size() - 1, VIRTIO_BLK_S_IOERR, 1, 0, true);
}

void BlockQueueHandler::serve(QueueWorker& w, DescriptorChain chain) {
  BlockRequest req = parse_block_request(chain, limits_);
  auto& c = *counters_;
  switch (req.op) {
    case BlockRequest::Op::kNone:
      if (req.status == nullptr) {
        // No device-writable byte: nowhere to say IOERR (§2.1.2: the device needs a reset).
        BlockCounters::add(c.malformed_chains);
        w.mark_unanswerable("request (head " + std::to_string(req.head) + ") without a status byte");
      } else {
        BlockCounters::add(req.status_value == VIRTIO_BLK_S_UNSUPP ? c.unsupp : c.ioerr);
        if (req.over_limits) BlockCounters::add(c.over_limits);
        complete(w, req.head, req.status, req.status_value, 1, 0, true);
      }
      TERN_LOG_RATELIMITED(w.log_limit(), debug, "{}: queue {}: request type {} refused: {}",
                           w.name(), w.index(), req.type, req.problem);
      return;
    case BlockRequest::Op::kGetId: {
      uint8_t id[VIRTIO_BLK_ID_BYTES] = {};
      std::memcpy(id, serial_.data(), std::min<size_t>(serial_.size(), sizeof id));
      size_t done = 0;
      for (const auto& v : req.data) {
        std::memcpy(v.iov_base, id + done, v.iov_len);
        done += v.iov_len;
      }
      BlockCounters::add(c.get_ids);
      complete(w, req.head, req.status, VIRTIO_BLK_S_OK, req.success_used_len(), 0, false);
      return;
    }
    case BlockRequest::Op::kIn:
    case BlockRequest::Op::kOut:
      if (req.len == 0) {
        complete(w, req.head, req.status, VIRTIO_BLK_S_OK, req.success_used_len(), 0, false);
        return;
      }
      break;
    default: break;
  }
  uint16_t slot = free_.back();
  free_.pop_back();
  pending_[slot] = Pending{req.head, req.status, req.success_used_len(), req.op, req.len};
  BlockOp op;
  op.kind = op_kind(req.op);
  op.offset = req.offset;
  op.len = req.len;
  op.iov = std::move(req.data);
  op.ranges = std::move(req.ranges);
  op.tag = slot;
  if (auto now = executor_->submit(std::move(op))) finish(w, slot, *now);
}

void BlockQueueHandler::finish(QueueWorker& w, uint16_t slot, BlockStatus status) {
  Pending p = pending_[slot];
  free_.push_back(slot);
  auto& c = *counters_;
  if (status != BlockStatus::kOk) {
    BlockCounters::add(c.ioerr);
    if (status == BlockStatus::kHostError) BlockCounters::add(c.host_io_errors);
    complete(w, p.head, p.status, VIRTIO_BLK_S_IOERR, 1, 0, true);
    return;
  }
  uint64_t bytes = 0;
  switch (p.op) {
    case BlockRequest::Op::kIn:
      BlockCounters::add(c.reads);
      BlockCounters::add(c.bytes_read, p.len);
      bytes = p.len;
      break;
    case BlockRequest::Op::kOut:
      BlockCounters::add(c.writes);
      BlockCounters::add(c.bytes_written, p.len);
      bytes = p.len;
      break;
    case BlockRequest::Op::kFlush: BlockCounters::add(c.flushes); break;
    case BlockRequest::Op::kDiscard: BlockCounters::add(c.discards); break;
    case BlockRequest::Op::kWriteZeroes: BlockCounters::add(c.write_zeroes); break;
    default: break;
  }
  complete(w, p.head, p.status, VIRTIO_BLK_S_OK, p.used_len, bytes, false);
}

void BlockQueueHandler::finish_all(QueueWorker& w) {
  for (const auto& d : done_) finish(w, static_cast<uint16_t>(d.tag), d.status);
  done_.clear();
}

void BlockQueueHandler::on_fd(QueueWorker& w, uint32_t tag) {
  if (tag != kTagIo) return;
  executor_->reap(done_);
  finish_all(w);
}

void BlockQueueHandler::drain(QueueWorker& w) {
  executor_->drain(done_);
  finish_all(w);
}

}  // namespace tern::virtio
