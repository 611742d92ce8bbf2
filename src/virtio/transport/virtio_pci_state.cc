// Snapshot save/restore of VirtioPciInterrupt and VirtioPciTransport.
#include <fcntl.h>

#include <cstring>

#include "devices/device_state.h"
#include "devices/pci/pci_registers.h"
#include "virtio/transport/virtio_pci_registers.h"
#include "virtio/transport/virtio_pci_transport.h"
#include "virtio/virtio_spec.h"

namespace tern {

namespace vp = virtio_pci;
using devstate::bad_field;
using devstate::named;

namespace {
constexpr uint32_t kVersion = 1;
constexpr size_t kMaxDeviceState = 1 << 20;
constexpr uint8_t kStoredStatusBits = static_cast<uint8_t>(~vp::DEVICE_NEEDS_RESET);
}  // namespace

// ---- VirtioPciInterrupt ----

void VirtioPciInterrupt::save_state(snap::ByteWriter& w) const {
  std::lock_guard lock(mu_);
  w.u8(isr_);
  w.boolean(line_);
  w.boolean(needs_reset_.load());
  w.u16(config_vector_);
  w.u16(static_cast<uint16_t>(queue_vectors_.size()));
  for (uint16_t v : queue_vectors_) w.u16(v);
}

Result<void> VirtioPciInterrupt::restore_state(snap::ByteReader& r, std::string_view device,
                                               bool intx_disabled) {
  ASSIGN_OR_RETURN(uint8_t isr, named(device, "isr", r.u8()));
  ASSIGN_OR_RETURN(bool line, named(device, "intx level", r.boolean()));
  ASSIGN_OR_RETURN(bool needs_reset, named(device, "needs reset", r.boolean()));
  ASSIGN_OR_RETURN(uint16_t config_vector, named(device, "config_msix_vector", r.u16()));
  ASSIGN_OR_RETURN(uint16_t nq, named(device, "queue count", r.u16()));
  std::lock_guard lock(mu_);
  if (nq != queue_vectors_.size())
    return bad_field(device, "queue count",
                     std::to_string(nq) + " saved, device has " +
                         std::to_string(queue_vectors_.size()));
  std::vector<uint16_t> vectors(nq);
  auto check_vector = [&](uint16_t v, const std::string& field) -> Result<void> {
    if (v != vp::VIRTIO_MSI_NO_VECTOR && v >= msix_->size())
      return bad_field(device, field,
                       "vector " + std::to_string(v) + " outside the " +
                           std::to_string(msix_->size()) + "-entry MSI-X table");
    return {};
  };
  TRY(check_vector(config_vector, "config_msix_vector"));
  for (uint16_t q = 0; q < nq; ++q) {
    std::string field = "queue " + std::to_string(q) + " msix vector";
    ASSIGN_OR_RETURN(vectors[q], named(device, field, r.u16()));
    TRY(check_vector(vectors[q], field));
  }
  if (isr & ~(vp::kIsrQueue | vp::kIsrConfig))
    return bad_field(device, "isr", std::to_string(isr) + " has unknown bits");
  if (line && (isr == 0 || intx_disabled))
    return bad_field(device, "intx level", "high without ISR bits or with INTx disabled");
  isr_ = isr;
  line_ = line;
  intx_disabled_ = intx_disabled;
  needs_reset_.store(needs_reset);
  config_vector_ = config_vector;
  queue_vectors_ = std::move(vectors);
  return {};
}

// ---- VirtioPciTransport ----

void VirtioPciTransport::save_state(snap::ByteWriter& w) const {
  std::lock_guard lock(mu_);
  w.u32(kVersion);
  config_.save_state(w);
  interrupt_->msix().save_state(w);
  interrupt_->save_state(w);
  w.u32(device_feature_select_);
  w.u32(driver_feature_select_);
  w.u64(driver_features_);
  w.u8(status_);
  w.u8(config_generation_);
  w.u16(queue_select_);
  w.boolean(activated_);
  std::vector<QueuePosition> pos(queues_.size());
  if (activated_) {
    auto p = device_->queue_positions();
    for (size_t i = 0; i < pos.size() && i < p.size(); ++i)
      if (queues_[i].config.enabled) pos[i] = p[i];
  }
  w.u16(static_cast<uint16_t>(queues_.size()));
  for (size_t i = 0; i < queues_.size(); ++i) {
    const VirtqueueConfig& q = queues_[i].config;
    w.u16(q.size);
    w.boolean(q.enabled);
    w.u64(q.desc_gpa);
    w.u64(q.avail_gpa);
    w.u64(q.used_gpa);
    w.u16(pos[i].next_avail);
    w.u16(pos[i].next_used);
  }
  snap::ByteWriter dev;
  device_->save_device_state(dev);
  w.blob(dev.data());
}

Result<void> VirtioPciTransport::restore_state(snap::ByteReader& r) {
  const std::string dev(name());
  std::lock_guard lock(mu_);
  if (activated_ || status_ != 0)
    return fail("restore " + dev, "the transport was already used (restore needs a fresh one)");
  TRY(devstate::expect_version(r, dev, kVersion));
  PciConfigSpace cfg = config_;
  TRY(cfg.restore_state(r, dev));
  TRY(interrupt_->msix().restore_state(r, dev));
  const uint16_t cmd = cfg.command();
  TRY(interrupt_->restore_state(r, dev, (cmd & pci::kCommandIntxDisable) != 0));

  ASSIGN_OR_RETURN(uint32_t dfs, named(dev, "device_feature_select", r.u32()));
  ASSIGN_OR_RETURN(uint32_t drfs, named(dev, "driver_feature_select", r.u32()));
  ASSIGN_OR_RETURN(uint64_t features, named(dev, "driver_features", r.u64()));
  ASSIGN_OR_RETURN(uint8_t status, named(dev, "device_status", r.u8()));
  ASSIGN_OR_RETURN(uint8_t generation, named(dev, "config_generation", r.u8()));
  ASSIGN_OR_RETURN(uint16_t queue_select, named(dev, "queue_select", r.u16()));
  ASSIGN_OR_RETURN(bool activated, named(dev, "activated", r.boolean()));
  if (status & ~kStoredStatusBits)
    return bad_field(dev, "device_status", "DEVICE_NEEDS_RESET is not stored in the status");
  if ((status & vp::FEATURES_OK) && !(status & vp::DRIVER))
    return bad_field(dev, "device_status", "FEATURES_OK without DRIVER");
  if (status & vp::FEATURES_OK) {
    uint64_t offered = device_->device_features();
    if ((features & ~offered) != 0 ||
        !(features & virtio::feature(virtio::VIRTIO_F_VERSION_1)))
      return bad_field(dev, "driver_features",
                       "not a subset of the offered features with VERSION_1");
  }
  if (activated && !((status & vp::DRIVER_OK) && (status & vp::FEATURES_OK)))
    return bad_field(dev, "activated", "set without DRIVER_OK and FEATURES_OK");

  ASSIGN_OR_RETURN(uint16_t nq, named(dev, "queue count", r.u16()));
  if (nq != queues_.size())
    return bad_field(dev, "queue count",
                     std::to_string(nq) + " saved, device has " + std::to_string(queues_.size()));
  std::vector<VirtqueueConfig> qs(nq);
  for (uint16_t i = 0; i < nq; ++i) {
    const std::string f = "queue " + std::to_string(i);
    VirtqueueConfig& q = qs[i];
    ASSIGN_OR_RETURN(q.size, named(dev, f + " size", r.u16()));
    ASSIGN_OR_RETURN(q.enabled, named(dev, f + " enable", r.boolean()));
    ASSIGN_OR_RETURN(q.desc_gpa, named(dev, f + " desc", r.u64()));
    ASSIGN_OR_RETURN(q.avail_gpa, named(dev, f + " driver", r.u64()));
    ASSIGN_OR_RETURN(q.used_gpa, named(dev, f + " device", r.u64()));
    ASSIGN_OR_RETURN(q.position.next_avail, named(dev, f + " next avail index", r.u16()));
    ASSIGN_OR_RETURN(q.position.next_used, named(dev, f + " next used index", r.u16()));
    if (q.size == 0 || (q.size & (q.size - 1)) != 0 || q.size > device_->max_queue_size())
      return bad_field(dev, f + " size",
                       std::to_string(q.size) + " is not a power of two ≤ " +
                           std::to_string(device_->max_queue_size()));
    if (q.enabled && (q.desc_gpa % 16 || q.avail_gpa % 2 || q.used_gpa % 4))
      return bad_field(dev, f + " addresses", "misaligned rings on an enabled queue");
    auto outstanding = static_cast<uint16_t>(q.position.next_avail - q.position.next_used);
    if (activated && q.enabled) {
      if (outstanding > q.size)
        return bad_field(dev, f + " position",
                         "next avail " + std::to_string(q.position.next_avail) + " is more than " +
                             std::to_string(q.size) + " ahead of next used " +
                             std::to_string(q.position.next_used));
    } else if (q.position != QueuePosition{}) {
      return bad_field(dev, f + " position", "non-zero on a queue that is not running");
    }
  }
  ASSIGN_OR_RETURN(auto dev_state, named(dev, "device state", r.blob(kMaxDeviceState)));
  snap::ByteReader dr(dev_state, "restore " + dev + " device state");
  TRY(device_->restore_device_state(dr));
  TRY(dr.expect_end());

  config_ = cfg;
  msix_cap_.sync(config_, interrupt_->msix());
  device_feature_select_ = dfs;
  driver_feature_select_ = drfs;
  driver_features_ = features;
  status_ = status;
  config_generation_ = generation;
  queue_select_ = queue_select;
  for (uint16_t i = 0; i < nq; ++i) queues_[i].config = qs[i];
  move_ioeventfds_locked();
  if (activated) {
    // Before any vCPU runs (restore): directly, not through the activator; the queues are
    // marked restored, so the device sends each enabled one a used-buffer notification.
    auto started = start_device_locked(/*restoring=*/true);
    if (!started) return fail("restore " + dev, "activate: " + started.error().message());
    activated_ = true;
  }
  return {};
}

}  // namespace tern
