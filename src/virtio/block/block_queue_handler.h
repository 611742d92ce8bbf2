// BlockQueueHandler: virtio-blk's request handling for one queue, on a QueueWorker. Each chain
// is parsed (parse_block_request) into a BlockRequest, answered at once when there is nothing to
// execute (refused, GET_ID, empty read/write), or mapped onto a BlockOp for the queue's
// BlockExecutor; completions set the status byte and return the chain.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "block/block_executor.h"
#include "block/disk_image.h"
#include "virtio/block/block_request.h"
#include "virtio/block/block_stats.h"
#include "virtio/queue_worker.h"

namespace tern::virtio {

/// See the file comment. Runs on its queue's worker thread only.
class BlockQueueHandler final : public QueueHandler {
 public:
  /// `depth` = queue size: the most requests in flight. `counters` outlives it.
  BlockQueueHandler(BlockCounters* counters, BlockLimits limits,
                    std::string serial, std::unique_ptr<BlockExecutor> executor, unsigned depth);

  std::vector<std::pair<BorrowedFd, uint32_t>> fds() override;
  bool ready(QueueWorker&) override;
  void serve(QueueWorker& w, DescriptorChain chain) override;
  /// A chain the walker refused: VIRTIO_BLK_S_IOERR in its last byte when that is device-writable
  /// (used length 1), else the queue is marked broken (DEVICE_NEEDS_RESET): a driver reading a
  /// stale status byte must never take a request tern did not carry out for a success.
  void refuse(QueueWorker& w, uint16_t head) override;
  void flush(QueueWorker&) override { executor_->flush(); }
  void on_fd(QueueWorker& w, uint32_t tag) override;
  void drain(QueueWorker& w) override;
  /// Requests handed to the executor and not completed yet.
  [[nodiscard]] uint32_t in_flight() const override {
    return static_cast<uint32_t>(pending_.size() - free_.size());
  }

  [[nodiscard]] std::string_view engine_name() const { return executor_->engine_name(); }

 private:
  /// What a request in the executor needs when it completes.
  struct Pending {
    uint16_t head = 0;
    uint8_t* status = nullptr;
    uint32_t used_len = 0;  // on success
    BlockRequest::Op op = BlockRequest::Op::kNone;
    uint64_t len = 0;
  };
  void finish(QueueWorker& w, uint16_t slot, BlockStatus status);
  void complete(QueueWorker& w, uint16_t head, uint8_t* status, uint8_t value, uint32_t used_len,
                uint64_t bytes, bool error);
  void finish_all(QueueWorker& w);

  BlockCounters* counters_;
  BlockLimits limits_;
  std::string serial_;
  std::unique_ptr<BlockExecutor> executor_;
  std::vector<Pending> pending_;
  std::vector<uint16_t> free_;
  std::vector<BlockCompletion> done_;
};

}  // namespace tern::virtio
