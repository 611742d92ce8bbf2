// VirtioDeviceBase: the common part of every virtio device with queue workers (Cloud Hypervisor's
// VirtioCommon, Firecracker's device trait): identity and offered features, queue count and
// size checks on activate(), one QueueWorker per enabled queue, reset(), quiesce()/unquiesce()
// with the queue positions for snapshots, and counters() with per-queue counters kept for the
// device's whole life. A device derives from it and supplies its config space, a QueueHandler
// per queue (make_queue_handler) and its named counters (device_counters).
//
// Thread-safety: identity/feature getters and counters() may be called from any thread at any
// time (immutable or relaxed atomics; counters() takes no lock). activate/reset/quiesce/unquiesce
// are serialized by an internal mutex.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "base/log.h"
#include "virtio/queue_counters.h"
#include "virtio/queue_worker.h"
#include "virtio/virtio_device.h"

namespace tern::virtio {

/// One enabled queue that activate() hands to an external backend instead of a QueueWorker.
struct ExternalQueue {
  uint16_t index = 0;      ///< Queue index in the device.
  VirtqueueConfig config;  ///< As the driver configured it; `position` is where to start.
  UniqueFd kick;           ///< The queue's kick eventfd (a KVM ioeventfd): the backend owns it.
};

/// A backend serving some of a device's queues outside tern's QueueWorkers: the kernel's
/// vhost-net, a vhost-user process. Destroying it stops the backend (the device's reset()).
class ExternalQueues {
 public:
  virtual ~ExternalQueues() = default;
  /// Stops the backend taking buffers; returns once nothing is in flight, with each queue's
  /// position (by queue index).
  virtual std::vector<std::pair<uint16_t, QueuePosition>> pause() = 0;
  /// Restarts after pause() from the paused positions. An error makes the device need reset.
  [[nodiscard]] virtual Result<void> resume() = 0;
  /// Brings the per-queue counters the backend keeps up to date (counters() calls it, under
  /// the device mutex), for counts the backend gathers lazily (vhost-net's used entries).
  virtual void sync_counters() {}
};

/// See the file comment.
class VirtioDeviceBase : public VirtioDevice {
 public:
  /// Stops the workers. A derived class whose handlers use its members must call reset() in its
  /// own destructor, so the workers stop before those members go away.
  ~VirtioDeviceBase() override;

  [[nodiscard]] uint32_t device_type() const final { return device_type_; }
  [[nodiscard]] std::string_view name() const final { return name_; }
  [[nodiscard]] uint64_t device_features() const final { return features_; }
  [[nodiscard]] uint16_t num_queues() const final { return num_queues_; }
  [[nodiscard]] uint16_t max_queue_size() const final { return max_queue_size_; }

  /// Starts one worker per enabled queue. Disabled queues are left alone (a Linux guest with
  /// fewer CPUs than queues enables only some). Fails if the counts do not match num_queues(),
  /// no queue is enabled, a size is not a power of two in 1..max_queue_size(), a ring is not in RAM, or the
  /// device's make_queue_handler() fails. `mem` must outlive the activation (until reset()).
  [[nodiscard]] Result<void> activate(const GuestMemory& mem, uint64_t acked_features,
                                      std::vector<VirtqueueConfig> queues,
                                      std::vector<UniqueFd> kicks,
                                      std::shared_ptr<VirtioInterrupt> interrupt) final;
  /// Stops every worker (each drains its handler first). Idempotent.
  void reset() final;
  /// Parks every worker after its in-flight chains complete (see VirtioDevice::quiesce).
  void quiesce() final;
  void unquiesce() final;
  /// Positions recorded when the workers parked; {0, 0} for queues without a worker.
  [[nodiscard]] std::vector<QueuePosition> queue_positions() const final;
  /// Name, kind, one QueueCountersSnapshot per queue (since the device was built) and the
  /// device's named counters. Lock-free.
  [[nodiscard]] DeviceCounters counters() const final;

  /// Queue `i`'s live counters (i < num_queues()).
  [[nodiscard]] const QueueCounters& queue_counters(uint16_t i) const { return *queues_[i]; }
  /// Sum of one field over all queues, e.g. sum_queues(&QueueCounters::requests).
  [[nodiscard]] uint64_t sum_queues(std::atomic<uint64_t> QueueCounters::*field) const;

 protected:
  /// `features` must include VIRTIO_F_VERSION_1.
  VirtioDeviceBase(uint32_t device_type, std::string name, uint64_t features, uint16_t num_queues,
                   uint16_t max_queue_size);

  /// Makes the handler of enabled queue `index` (called by activate() under the device mutex;
  /// `acked` = acked features & offered). An error fails the activation.
  [[nodiscard]] virtual Result<std::unique_ptr<QueueHandler>> make_queue_handler(
      uint16_t index, const VirtqueueConfig& queue, uint64_t acked) = 0;
  /// Called by activate() (under the device mutex) before any queue starts: device-wide set-up
  /// from the acked features (virtio-net: the tap's offloads). An error fails the activation.
  [[nodiscard]] virtual Result<void> on_activate(uint64_t /*acked*/) { return {}; }
  /// Called by reset() after every queue stopped (also when never activated).
  virtual void on_reset() {}
  /// True if enabled queue `index` is served by start_external() rather than a QueueWorker.
  [[nodiscard]] virtual bool external_queue(uint16_t /*index*/, uint64_t /*acked*/) const {
    return false;
  }
  /// Starts the backend for the external queues (index order), after the workers started. An
  /// error fails the activation.
  [[nodiscard]] virtual Result<std::unique_ptr<ExternalQueues>> start_external(
      const GuestMemory& /*mem*/, uint64_t /*acked*/, std::vector<ExternalQueue> /*queues*/,
      std::shared_ptr<VirtioInterrupt> /*interrupt*/) {
    return fail(name_, "no external queue backend");
  }

  /// Appends the device's named counters (snake_case, stable order). Any thread; keep it cheap.
  virtual void device_counters(std::vector<std::pair<std::string, uint64_t>>&) const {}

  RateLimit& log_limit() { return log_limit_; }
  /// Queue `i`'s live counters (i < num_queues()), for a device whose external backend reports
  /// per-queue events (the vhost-net call relay).
  [[nodiscard]] QueueCounters& live_queue_counters(uint16_t i) { return *queues_[i]; }
  /// The notification tuning every queue worker of later activations gets (constructor time).
  void set_notify_tuning(const NotifyTuning& t) { notify_tuning_ = t; }

 private:
  void stop_locked();  // mu_ held: stops workers and the external backend, calls on_reset()

  const uint32_t device_type_;
  const std::string name_;
  const uint64_t features_;
  const uint16_t num_queues_;
  const uint16_t max_queue_size_;
  NotifyTuning notify_tuning_;
  std::vector<std::unique_ptr<QueueCounters>> queues_;  // fixed at construction
  RateLimit log_limit_;
  mutable std::mutex mu_;  // activate / reset / quiesce
  std::vector<std::unique_ptr<QueueWorker>> workers_;
  std::unique_ptr<ExternalQueues> external_;
  std::shared_ptr<VirtioInterrupt> interrupt_;  // of the current activation
  bool quiesced_ = false;
  std::vector<QueuePosition> positions_;  // per queue, set by quiesce()
};

}  // namespace tern::virtio
