// The back-end's counters (issue #11 item 4): per queue (QueueCounters: requests, bytes, errors,
// kicks, interrupts), the block requests by kind (BlockCounters), and the connection's
// (connections, protocol errors, unsupported requests). Logged when it stops and on SIGUSR1.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "virtio/block/block_stats.h"
#include "virtio/queue_counters.h"

namespace tern::vhost_user {

/// All atomics: the queue workers and the serving thread add, anyone reads.
struct BackendStats {
  explicit BackendStats(uint16_t queues)
      : num_queues(queues), queue(std::make_unique<virtio::QueueCounters[]>(queues)) {}
  uint16_t num_queues;
  std::unique_ptr<virtio::QueueCounters[]> queue;  ///< One per queue, across connections.
  virtio::BlockCounters blk;
  std::atomic<uint64_t> connections{0};        ///< Front-ends accepted.
  std::atomic<uint64_t> protocol_errors{0};    ///< Connections dropped for a malformed message.
  std::atomic<uint64_t> unsupported{0};        ///< Requests refused or ignored as unsupported.
  std::atomic<uint64_t> failed_requests{0};    ///< Requests answered with a failure status.

  static void add(std::atomic<uint64_t>& c, uint64_t n = 1) {
    c.fetch_add(n, std::memory_order_relaxed);
  }
  /// One multi-line summary for the log.
  [[nodiscard]] std::string summary() const;
};

}  // namespace tern::vhost_user
