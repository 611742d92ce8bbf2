// Counters of one virtio-blk device, shared by its queue workers (relaxed atomics).
#pragma once

#include <atomic>
#include <cstdint>

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
  uint64_t malformed_chains = 0;  ///< Chains returned with used length 0 (bad chain, no status).
  uint64_t needs_reset = 0;       ///< Times a queue was found broken (DEVICE_NEEDS_RESET).
  uint64_t bounced = 0;           ///< O_DIRECT requests copied through an aligned bounce buffer.
  uint64_t over_limits = 0;       ///< Of ioerr: IN/OUT over the advertised size_max / seg_max.
  uint64_t bounce_waits = 0;      ///< Bounced requests that waited for the queue's bounce budget.
  uint64_t bounce_bytes = 0;      ///< Now: bytes of bounce buffers held (<= queues x 4 MiB).
};

/// The live counters. Every field mirrors BlockStats.
struct BlockCounters {
  std::atomic<uint64_t> requests{0}, reads{0}, writes{0}, flushes{0}, get_ids{0}, discards{0},
      write_zeroes{0}, bytes_read{0}, bytes_written{0}, ioerr{0}, unsupp{0}, host_io_errors{0},
      malformed_chains{0}, needs_reset{0}, bounced{0}, over_limits{0}, bounce_waits{0},
      bounce_bytes{0};

  static void add(std::atomic<uint64_t>& c, uint64_t n = 1) { c.fetch_add(n, std::memory_order_relaxed); }

  [[nodiscard]] BlockStats snapshot() const {
    auto g = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
    return BlockStats{g(requests),         g(reads),       g(writes),       g(flushes),
                      g(get_ids),          g(discards),    g(write_zeroes), g(bytes_read),
                      g(bytes_written),    g(ioerr),       g(unsupp),       g(host_io_errors),
                      g(malformed_chains), g(needs_reset), g(bounced),      g(over_limits),
                      g(bounce_waits),     g(bounce_bytes)};
  }
};

}  // namespace tern::virtio
