// VirtioDevice: the contract between a virtio device (block, net, ...) and its transport
// (virtio-pci, src/devices/pci/). Terms follow the virtio 1.2 spec: device status, feature bits,
// descriptor table / available ring / used ring, configuration space.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "base/fd.h"
#include "base/result.h"
#include "memory/guest_memory.h"
#include "snapshot/codec.h"
#include "stats/device_counters.h"

namespace tern {

/// How a device notifies the driver. Implemented by the transport (virtio-pci: an irqfd per
/// MSI-X vector, or INTx + ISR). All calls are thread-safe and non-blocking; device worker
/// threads call them.
class VirtioInterrupt {
 public:
  virtual ~VirtioInterrupt() = default;
  /// The device put buffers in queue `queue`'s used ring (virtio 1.2 §2.7.10 "used buffer
  /// notification"). The device decides suppression (EVENT_IDX / NO_INTERRUPT) before calling.
  virtual void signal_used_queue(uint16_t queue) = 0;
  /// The device configuration space changed (§4.1.4.5: ISR bit 1 / config MSI-X vector).
  virtual void signal_config_change() = 0;
  /// The device hit an unrecoverable driver error (e.g. a malformed ring it cannot skip): the
  /// transport sets DEVICE_NEEDS_RESET in device status and notifies a config change (§2.1.2).
  virtual void set_needs_reset() = 0;
  /// An eventfd that delivers queue `queue`'s used-buffer notification without tern when
  /// written (the KVM irqfd of the queue's MSI-X vector), for a backend that signals by itself
  /// (vhost-net's VHOST_SET_VRING_CALL). Invalid (-1) when there is none (INTx, no vector, or
  /// the transport cannot): the backend must then relay its call eventfd to signal_used_queue().
  /// Valid for the current activation; a vector masked meanwhile is not honoured by the fd.
  [[nodiscard]] virtual BorrowedFd queue_irqfd(uint16_t /*queue*/) const { return BorrowedFd(-1); }
  /// What watch_queue_irqfd() tells: the irqfd to signal queue `queue`'s notification with
  /// now, or BorrowedFd(-1) when a direct write would not be honoured (MSI-X disabled, the
  /// function or the vector masked): the backend must then call signal_used_queue() (which sets
  /// the vector's Pending bit, or uses INTx).
  using IrqfdWatch = std::function<void(BorrowedFd irqfd)>;
  /// For a backend that signals by itself (vhost's "guest notifier mask", as QEMU's
  /// virtio_pci_vector_mask/unmask): calls `fn` with the current irqfd before returning, then
  /// at each change, on the thread that changed it (a vCPU), under the transport's MSI-X lock:
  /// `fn` must not call back into this interrupt. An irqfd it is given has its MSI route. It
  /// follows the vector `queue` has now (vectors are set before DRIVER_OK). Returns an id for
  /// unwatch_queue_irqfd(), or 0 when the transport cannot (no MSI-X vector for `queue`, INTx
  /// only, a test double): then always signal_used_queue().
  [[nodiscard]] virtual uint64_t watch_queue_irqfd(uint16_t /*queue*/, IrqfdWatch /*fn*/) {
    return 0;
  }
  /// Once this returns, watch `id`'s function runs no more (0 and unknown ids are ignored).
  virtual void unwatch_queue_irqfd(uint64_t /*id*/) {}
};

/// Where the device is in a virtqueue's rings (free-running 16-bit indices, §2.7).
struct QueuePosition {
  uint16_t next_avail = 0;  ///< Next available-ring index the device will read.
  uint16_t next_used = 0;   ///< Next used-ring index the device will write.
  bool operator==(const QueuePosition&) const = default;
};

/// One virtqueue as the driver configured it through the transport (§4.1.4.3).
struct VirtqueueConfig {
  uint16_t size = 0;        ///< Entries; a power of two ≤ the device's max_queue_size().
  uint64_t desc_gpa = 0;    ///< Descriptor table (guest-physical).
  uint64_t avail_gpa = 0;   ///< Available ("driver") ring.
  uint64_t used_gpa = 0;    ///< Used ("device") ring.
  bool enabled = false;     ///< queue_enable was written 1.
  /// Where activate() starts: {0, 0} after feature negotiation; a snapshot restore starts the
  /// queue mid-stream at the positions queue_positions() reported when it was saved.
  QueuePosition position{};
  /// activate() resumes the queue from a snapshot (set by the transport's restore_state, never
  /// by a DRIVER_OK): the device owes the driver one used-buffer notification per enabled
  /// queue before the guest runs (VirtioDeviceBase::activate, docs/snapshots.md). Not saved.
  bool restored = false;
};

/// A virtio device, independent of the transport.
///
/// Life cycle: the transport negotiates features and queue configuration with the driver, then on
/// DRIVER_OK calls activate(); after that the device serves its queues on its own threads (kicks
/// arrive on the eventfds the transport registered as KVM ioeventfds). reset() (driver writes
/// status 0, or the VM stops) stops all device threads and returns the device to its initial
/// state; activate() may follow again. Config reads/writes come from vCPU threads at any time.
class VirtioDevice {
 public:
  virtual ~VirtioDevice() = default;
  /// Virtio device ID (§5: 2 = block, 1 = net, 3 = console).
  [[nodiscard]] virtual uint32_t device_type() const = 0;
  /// Short stable name for logs and statistics, e.g. "virtio-blk0".
  [[nodiscard]] virtual std::string_view name() const = 0;
  /// Device kind for the snapshot and statistics ("virtio-blk", "virtio-rng", ...): by default
  /// the virtio 1.2 §5 name of device_type() (virtio::device_kind_name).
  [[nodiscard]] virtual std::string_view kind() const;
  /// Feature bits the device offers (VIRTIO_F_VERSION_1 included by the device).
  [[nodiscard]] virtual uint64_t device_features() const = 0;
  [[nodiscard]] virtual uint16_t num_queues() const = 0;
  [[nodiscard]] virtual uint16_t max_queue_size() const = 0;
  /// FEATURES_OK (§3.1.1): whether the device accepts the driver's `acked` features (a subset of
  /// device_features() with VERSION_1, checked by the transport), e.g. the §5.1.3.1 feature
  /// dependencies of virtio-net. An error leaves FEATURES_OK clear (the driver gives up); its
  /// message is logged.
  [[nodiscard]] virtual Result<void> check_features(uint64_t /*acked*/) const { return {}; }
  /// Device-specific configuration space (§5.x.4), `offset` relative to its start. Out-of-range
  /// reads return zeros, out-of-range or read-only writes are ignored.
  virtual void read_config(uint64_t offset, std::span<uint8_t> data) = 0;
  virtual void write_config(uint64_t offset, std::span<const uint8_t> data) = 0;
  /// DRIVER_OK. `queues` has num_queues() entries; `kicks[i]` is the eventfd signalled when the
  /// driver notifies queue i (the device owns them from now on). Errors (e.g. a queue the device
  /// needs is not enabled) make the transport set DEVICE_NEEDS_RESET.
  [[nodiscard]] virtual Result<void> activate(const GuestMemory& mem, uint64_t acked_features,
                                              std::vector<VirtqueueConfig> queues,
                                              std::vector<UniqueFd> kicks,
                                              std::shared_ptr<VirtioInterrupt> interrupt) = 0;
  /// Stops device threads (in-flight requests completed or cancelled first) and forgets the
  /// queues. Idempotent.
  virtual void reset() = 0;

  // ---- snapshots ----

  /// Brings the device to a consistent point: every request taken from an available ring is
  /// completed into its used ring (with its interrupt), and no new one is taken; returns when
  /// nothing is in flight. Kicks arriving meanwhile stay pending in the kick eventfds. No-op when
  /// not activated. The default suits devices without threads.
  virtual void quiesce() {}
  /// Ends quiesce(): workers resume and re-check their queues.
  virtual void unquiesce() {}
  /// Per queue (num_queues() entries; {0, 0} for queues not running): where the device is in the
  /// rings. Valid while quiesced (or not activated).
  [[nodiscard]] virtual std::vector<QueuePosition> queue_positions() const {
    return std::vector<QueuePosition>(num_queues());
  }
  /// Device-specific state beyond the transport's registers and the queue positions (virtio-blk:
  /// none; its config space is derived from the disk). Called while quiesced.
  virtual void save_device_state(snap::ByteWriter&) const {}
  /// Restores save_device_state()'s bytes, before activate(). Errors name the device and field.
  [[nodiscard]] virtual Result<void> restore_device_state(snap::ByteReader&) { return {}; }

  // ---- statistics ----

  /// Counters since the device was built (any thread, any time; relaxed reads). The default
  /// reports name and kind only.
  [[nodiscard]] virtual DeviceCounters counters() const;
};

}  // namespace tern
