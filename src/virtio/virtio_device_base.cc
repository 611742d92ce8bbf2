#include "virtio/virtio_device_base.h"

#include "virtio/virtio_spec.h"

namespace tern::virtio {

VirtioDeviceBase::VirtioDeviceBase(uint32_t device_type, std::string name, uint64_t features,
                                   uint16_t num_queues, uint16_t max_queue_size)
    : device_type_(device_type),
      name_(std::move(name)),
      features_(features),
      num_queues_(num_queues),
      max_queue_size_(max_queue_size) {
  TERN_CHECK((features & feature(VIRTIO_F_VERSION_1)) != 0);
  for (uint16_t i = 0; i < num_queues; ++i) queues_.push_back(std::make_unique<QueueCounters>());
}

VirtioDeviceBase::~VirtioDeviceBase() { reset(); }

Result<void> VirtioDeviceBase::activate(const GuestMemory& mem, uint64_t acked_features,
                                        std::vector<VirtqueueConfig> queues,
                                        std::vector<UniqueFd> kicks,
                                        std::shared_ptr<VirtioInterrupt> interrupt) {
  std::lock_guard lock(mu_);
  stop_locked();
  if (queues.size() != num_queues_ || kicks.size() != queues.size())
    return fail(name_, "activate: expected " + std::to_string(num_queues_) + " queues");
  if (!interrupt) return fail(name_, "activate: no interrupt");
  uint64_t acked = acked_features & features_;
  if (auto r = on_activate(acked); !r) {
    on_reset();
    return fail(name_, "activate: " + r.error().message());
  }

  std::vector<std::unique_ptr<QueueWorker>> workers;
  std::vector<ExternalQueue> external;
  // A failure after on_activate(): the queues started stop, then on_reset() undoes it.
  auto failed = [&](std::string why) -> Result<void> {
    workers.clear();
    on_reset();
    return fail(name_, std::move(why));
  };
  for (uint16_t i = 0; i < queues.size(); ++i) {
    if (!queues[i].enabled) continue;
    // §2.7: a split virtqueue's size is a power of 2 (the ring index wraps at 2^16, and the
    // slot is index % size: any other size desynchronizes device and driver at the wrap).
    const uint16_t size = queues[i].size;
    if (size == 0 || size > max_queue_size_ || (size & (size - 1)) != 0)
      return failed("queue " + std::to_string(i) + ": size " + std::to_string(size) +
                    " not a power of two in 1.." + std::to_string(max_queue_size_));
    if (external_queue(i, acked)) {
      external.push_back(ExternalQueue{i, queues[i], std::move(kicks[i])});
      continue;
    }
    auto handler = make_queue_handler(i, queues[i], acked);
    if (!handler) return failed("queue " + std::to_string(i) + ": " + handler.error().message());
    QueueWorkerContext ctx;
    ctx.mem = &mem;
    ctx.interrupt = interrupt;
    ctx.queue = queues[i];
    ctx.index = i;
    ctx.features = acked;
    ctx.name = name_;
    ctx.log_limit = &log_limit_;
    ctx.counters = queues_[i].get();
    ctx.tuning = notify_tuning_;
    auto w = QueueWorker::start(std::move(ctx), std::move(kicks[i]), std::move(*handler));
    if (!w) return failed("queue " + std::to_string(i) + ": " + w.error().message());
    workers.push_back(std::move(*w));
  }
  if (workers.empty() && external.empty()) return failed("activate: no queue enabled");
  workers_ = std::move(workers);
  if (!external.empty()) {
    auto ext = start_external(mem, acked, std::move(external), interrupt);
    if (!ext) {
      stop_locked();
      return fail(name_, "activate: " + ext.error().message());
    }
    external_ = std::move(*ext);
  }
  // Snapshot restore rule: each enabled queue of a restored device gets one used-buffer
  // notification now, unconditionally, on the restoring thread (before any vCPU runs: the MSI
  // lands in a LAPIC already restored, a masked vector sets its PBA bit, INTx raises ISR). The
  // snapshot does not carry a notification the device owed or sent at the save (one held by
  // coalesce_us, or an interrupt not yet in the saved LAPIC), and with VIRTIO_F_EVENT_IDX a lost
  // one stalls the queue for good: used->idx is already past the driver's used_event, so every
  // later completion is suppressed (vring_need_event) while the driver waits for the first.
  // A spurious notification is harmless (§2.7.7.1: the driver MUST handle them; it re-reads
  // used->idx), and the device's suppression state need not be saved (QEMU's virtio_load()
  // clears signalled_used_valid for the same reason). External queues (vhost-net, vhost-user)
  // too: their back-end starts afresh and knows nothing of the save either. Not in the queue's
  // `interrupts` counter (that counts used-ring publishes, ≤ requests); the transport's
  // interrupts_sent has it.
  for (uint16_t i = 0; i < queues.size(); ++i) {
    if (!queues[i].enabled || !queues[i].restored) continue;
    interrupt->signal_used_queue(i);
  }
  interrupt_ = std::move(interrupt);
  return {};
}

void VirtioDeviceBase::stop_locked() {
  workers_.clear();  // each destructor drains its handler and joins its thread
  external_.reset();
  interrupt_.reset();
  quiesced_ = false;
  positions_.clear();
  on_reset();
}

void VirtioDeviceBase::reset() {
  std::lock_guard lock(mu_);
  stop_locked();
}

void VirtioDeviceBase::quiesce() {
  std::lock_guard lock(mu_);
  positions_.assign(num_queues_, QueuePosition{});
  // Each worker completes what it took from its ring, then parks.
  for (auto& w : workers_) positions_[w->index()] = w->pause();
  if (external_)
    for (auto [i, pos] : external_->pause())
      if (i < num_queues_) positions_[i] = pos;
  quiesced_ = true;
}

void VirtioDeviceBase::unquiesce() {
  std::lock_guard lock(mu_);
  if (!quiesced_) return;
  for (auto& w : workers_) w->resume();
  if (external_) {
    if (auto r = external_->resume(); !r) {
      TERN_LOG_RATELIMITED(log_limit_, warn, "{}: resume: {}; device needs reset", name_,
                           r.error().message());
      if (interrupt_) interrupt_->set_needs_reset();
    }
  }
  quiesced_ = false;
}

std::vector<QueuePosition> VirtioDeviceBase::queue_positions() const {
  std::lock_guard lock(mu_);
  if (positions_.size() != num_queues_) return std::vector<QueuePosition>(num_queues_);
  return positions_;
}

uint64_t VirtioDeviceBase::sum_queues(std::atomic<uint64_t> QueueCounters::*field) const {
  uint64_t sum = 0;
  for (const auto& q : queues_) sum += ((*q).*field).load(std::memory_order_relaxed);
  return sum;
}

DeviceCounters VirtioDeviceBase::counters() const {
  DeviceCounters c;
  c.name = name_;
  c.kind = std::string(kind());
  {
    std::lock_guard lock(mu_);
    if (external_) external_->sync_counters();
  }
  for (uint16_t i = 0; i < num_queues_; ++i) c.queues.push_back(queues_[i]->snapshot(i));
  device_counters(c.counters);
  return c;
}

}  // namespace tern::virtio
