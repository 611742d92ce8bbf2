// DeviceCounters: what one device reports to the statistics — GET /tern/stats "devices",
// /tern/metrics and `tern stat` (docs/stats.md). Plain values with no dependencies, so any device
// folder can produce them and src/stats can render them without knowing the device.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tern {

/// One virtqueue's counters since the VM was built (they survive device resets; counts, not
/// rates). Relation for a request/response queue (virtio 1.2 §2.7.7, §2.7.10): every request
/// taken is counted in `requests`; `kicks` ≤ requests + spurious kicks, lower when the driver
/// suppresses notifications (EVENT_IDX avail_event / VIRTQ_USED_F_NO_NOTIFY); every used-ring
/// publish that added entries is either one of `interrupts` or one of `interrupts_suppressed`.
struct QueueCountersSnapshot {
  uint16_t index = 0;                  ///< Queue index within the device.
  uint64_t kicks = 0;                  ///< Driver notifications: the sum of the kick eventfd's reads.
  uint64_t requests = 0;               ///< Descriptor chains taken from the available ring.
  uint64_t interrupts = 0;             ///< Used-buffer notifications sent (one MSI-X message each
                                       ///< while the vector is mapped and unmasked).
  uint64_t interrupts_suppressed = 0;  ///< Used-ring publishes the driver asked not to be told of
                                       ///< (EVENT_IDX used_event / VIRTQ_AVAIL_F_NO_INTERRUPT).
  uint64_t interrupts_coalesced = 0;   ///< Notifications folded into a held one (coalesce_us).
  uint64_t poll_hits = 0;              ///< Idle polls (poll_us) that found new entries.
  uint64_t poll_ns = 0;                ///< Time spent polling the available ring (ns).
  uint64_t bytes = 0;                  ///< Payload bytes moved (blk: read + written; rng: supplied).
  uint64_t errors = 0;                 ///< Requests completed with an error status or returned
                                       ///< malformed (used length 0).
};

/// One device's counters.
struct DeviceCounters {
  std::string name;  ///< Stable device name, e.g. "virtio-blk0".
  std::string kind;  ///< Device kind, e.g. "virtio-blk", "virtio-rng".
  std::vector<QueueCountersSnapshot> queues;
  /// Device-wide named counters (e.g. blk "reads", "ioerr"; the transport's "protocol_errors",
  /// "interrupts_sent"), in a stable order. Names are snake_case.
  std::vector<std::pair<std::string, uint64_t>> counters;
};

}  // namespace tern
