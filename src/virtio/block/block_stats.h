// Counters of one virtio-blk device, shared by its queue handlers (relaxed atomics).
#pragma once

#include <atomic>
#include <cstdint>

#include "block/block_executor.h"

namespace tern::virtio {

/// A snapshot of a device's counters.
struct BlockStats {
  uint64_t requests = 0;          ///< Chains served (including refused ones).
  uint64_t reads = 0;             ///< VIRTIO_BLK_T_IN completed OK.
  uint64_t writes = 0;            ///< VIRTIO_BLK_T_OUT completed OK.
  uint64_t flushes = 0;
  uint64_t get_ids = 0;
  uint64_t discards = 0;
  uint64_t write_zeroes = 0;
  uint64_t bytes_read = 0;
  uint64_t bytes_written = 0;
  uint64_t ioerr = 0;             ///< Requests answered VIRTIO_BLK_S_IOERR (guest or host cause).
  uint64_t unsupp = 0;            ///< Requests answered VIRTIO_BLK_S_UNSUPP.
  uint64_t host_io_errors = 0;    ///< Of ioerr: the host's I/O failed (not the guest's fault).
  uint64_t malformed_chains = 0;  ///< Chains refused (bad chain: IOERR in its last byte; no status
                                  ///< byte: DEVICE_NEEDS_RESET).
  uint64_t needs_reset = 0;       ///< Times a queue was found broken (DEVICE_NEEDS_RESET).
  uint64_t bounced = 0;           ///< O_DIRECT requests copied through an aligned bounce buffer.
  uint64_t over_limits = 0;       ///< Of ioerr: IN/OUT over the advertised size_max / seg_max.
  uint64_t bounce_waits = 0;      ///< Bounced requests that waited for the queue's bounce budget.
  uint64_t bounce_bytes = 0;      ///< Now: bytes of bounce buffers held (<= queues x 4 MiB).
};

/// The live block-specific counters. `requests`, `needs_reset` and the walker's malformed chains
/// are per-queue counters of the device base (VirtioBlock::stats() adds them); bounce counters
/// are the executors' (`io`).
struct BlockCounters {
  std::atomic<uint64_t> reads{0}, writes{0}, flushes{0}, get_ids{0}, discards{0}, write_zeroes{0},
      bytes_read{0}, bytes_written{0}, ioerr{0}, unsupp{0}, host_io_errors{0},
      malformed_chains{0}, over_limits{0};
  BlockExecutorCounters io;

  static void add(std::atomic<uint64_t>& c, uint64_t n = 1) {
    c.fetch_add(n, std::memory_order_relaxed);
  }

  /// Block fields only (requests, needs_reset: 0; malformed_chains: the parser's only).
  [[nodiscard]] BlockStats snapshot() const {
    auto g = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
    BlockStats s;
    s.reads = g(reads);
    s.writes = g(writes);
    s.flushes = g(flushes);
    s.get_ids = g(get_ids);
    s.discards = g(discards);
    s.write_zeroes = g(write_zeroes);
    s.bytes_read = g(bytes_read);
    s.bytes_written = g(bytes_written);
    s.ioerr = g(ioerr);
    s.unsupp = g(unsupp);
    s.host_io_errors = g(host_io_errors);
    s.malformed_chains = g(malformed_chains);
    s.over_limits = g(over_limits);
    s.bounced = g(io.bounced);
    s.bounce_waits = g(io.bounce_waits);
    s.bounce_bytes = g(io.bounce_bytes);
    return s;
  }
};

}  // namespace tern::virtio
