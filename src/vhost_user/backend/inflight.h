// Inflight I/O tracking for split virtqueues (vhost-user spec "Inflight I/O tracking"): the
// shared-memory region of INFLIGHT_SHMFD in which the back-end marks every descriptor chain it
// has taken from the available ring and not yet returned, so that a restarted back-end (or a new
// one after a crash) resubmits those chains instead of losing them. The front-end keeps the
// region (memfd) across back-end restarts and hands it back with SET_INFLIGHT_FD.
//
// The region is shared with the front-end, so its contents are untrusted: every index read from
// it is checked against the queue size before use.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/fd.h"
#include "base/result.h"
#include "memory/guest_memory.h"
#include "vhost_user/vhost_user_spec.h"
#include "virtio/queue_worker.h"

namespace tern::vhost_user {

/// The mapped inflight region: num_queues queue regions of inflight_queue_region_bytes(queue_size).
class InflightRegion {
 public:
  /// GET_INFLIGHT_FD: a new zeroed memfd for `num_queues` × `queue_size` (each queue's region
  /// version 1, desc_num = queue_size). Errors: a queue size that is not a power of two in
  /// 1..32768, no queues, memfd failure.
  [[nodiscard]] static Result<InflightRegion> create(uint16_t num_queues, uint16_t queue_size);
  /// SET_INFLIGHT_FD: maps `fd` as `info` describes (mmap_size must cover num_queues queue
  /// regions of queue_size; mmap_offset page-aligned).
  [[nodiscard]] static Result<InflightRegion> map(const VhostUserInflight& info, UniqueFd fd);

  /// The description for GET_INFLIGHT_FD's reply (mmap_offset 0) and the fd to send.
  [[nodiscard]] const VhostUserInflight& info() const { return info_; }
  [[nodiscard]] BorrowedFd fd() const { return fd_.borrow(); }
  [[nodiscard]] uint16_t num_queues() const { return info_.num_queues; }
  [[nodiscard]] uint16_t queue_size() const { return info_.queue_size; }
  /// Queue `q`'s region (q < num_queues()).
  [[nodiscard]] uint8_t* queue(uint16_t q) const;

 private:
  InflightRegion(VhostUserInflight info, UniqueFd fd, std::unique_ptr<uint8_t, Unmapper> map,
                 uint64_t offset)
      : info_(info), fd_(std::move(fd)), map_(std::move(map)), offset_(offset) {}
  VhostUserInflight info_;
  UniqueFd fd_;
  std::unique_ptr<uint8_t, Unmapper> map_;
  uint64_t offset_ = 0;  // of the first queue region in map_
};

/// One queue's view of the region, as the QueueWorker's observer: marks chains inflight when
/// popped (desc[head].inflight = 1, counter = fetch order), sets last_batch_head before used->idx
/// is published and clears the batch's entries after (then used_idx), as libvhost-user's
/// vu_queue_inflight_get / pre_put / post_put do.
class InflightQueue final : public virtio::QueueObserver {
 public:
  /// `region` points at queue_size DescStateSplit entries after a QueueRegionSplit.
  InflightQueue(uint8_t* region, uint16_t queue_size) : base_(region), size_(queue_size) {}

  /// At ring start (spec "reconnect"): a region never used (version 0) is initialized. Else the
  /// entries published to the used ring after the region's used_idx are cleared (a back-end that
  /// died between publishing and clearing), and the heads still inflight are returned in the
  /// order they were taken; `next_avail` becomes used_idx + their number (libvhost-user's
  /// vu_check_queue_inflights) and the fetch counter continues after theirs.
  /// `used_ring_gpa` locates the used ring in `mem`; `ring_used_idx` is used->idx.
  [[nodiscard]] std::vector<uint16_t> recover(const GuestMemory& mem, uint64_t used_ring_gpa,
                                              uint16_t ring_used_idx, uint16_t& next_avail);

  void on_pop(uint16_t head) override;
  void on_used(uint16_t head) override { batch_.push_back(head); }
  void on_before_publish(uint16_t used_idx) override;
  void on_published(uint16_t used_idx) override;

 private:
  [[nodiscard]] QueueRegionSplit* hdr() const { return reinterpret_cast<QueueRegionSplit*>(base_); }
  [[nodiscard]] DescStateSplit* desc(uint16_t i) const {
    return reinterpret_cast<DescStateSplit*>(base_ + sizeof(QueueRegionSplit)) + i;
  }
  uint8_t* base_;
  uint16_t size_;
  uint64_t counter_ = 0;
  std::vector<uint16_t> batch_;  // heads added to the used ring since the last publish
};

}  // namespace tern::vhost_user
