// NotifyTuning: how a queue worker trades notifications (VM exits) for latency and host CPU,
// per device (--disk kick_suppress=, coalesce_us=, poll_us=; docs/block-benchmark.md "Fewer
// exits per I/O"). Each knob cuts one kind of exit:
// - kick_suppress: the driver's notifications (virtio 1.2 §2.7.10: avail_event with
//   VIRTIO_F_EVENT_IDX, else VIRTQ_USED_F_NO_NOTIFY) stay off while requests are in flight: a
//   completion wakes the worker anyway, and it takes what the driver added meanwhile. Saves the
//   notify write (an ioeventfd exit) of every request submitted while others are in flight;
//   a request submitted then waits for the next completion at most.
// - coalesce_us: a used-buffer notification (§2.7.7) is held up to this many µs while other
//   requests are in flight, so completions close together share one interrupt (and one EOI);
//   sent at once when nothing else is in flight (QD1 latency unchanged).
// - poll_us: when the queue goes idle (nothing in flight), the worker watches the available ring
//   for up to this many µs with notifications off before it sleeps (QEMU's iothread poll-max-ns):
//   a request that comes in that time needs no notify write; costs host CPU while it spins.
#pragma once

#include <cstdint>

#include "block/disk_config.h"

namespace tern::virtio {

/// Largest coalesce_us / poll_us accepted (µs): 10 ms, far above any useful value.
using tern::kMaxNotifyTuningUs;

/// See the file comment. The zero value is all off (what a device without tuning gets); a disk's
/// defaults are DiskConfig's (kick_suppress on).
struct NotifyTuning {
  bool kick_suppress = false;  ///< Driver notifications off while requests are in flight.
  uint32_t coalesce_us = 0;    ///< Max µs a used-buffer notification is held; 0 = off.
  uint32_t poll_us = 0;        ///< Max µs the idle worker polls the available ring; 0 = off.
  bool operator==(const NotifyTuning&) const = default;
};

}  // namespace tern::virtio
