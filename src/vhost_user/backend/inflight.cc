#include "vhost_user/backend/inflight.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>

#include "base/checked.h"
#include "virtio/virtio_spec.h"

namespace tern::vhost_user {

namespace {
constexpr uint16_t kInflightVersion = 1;

bool valid_queue_size(uint16_t n) { return n != 0 && (n & (n - 1)) == 0; }

Result<std::unique_ptr<uint8_t, Unmapper>> map_shared(int fd, uint64_t len, uint64_t offset) {
  void* p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(offset));
  if (p == MAP_FAILED) return fail_errno("mmap", "vhost-user inflight region");
  return std::unique_ptr<uint8_t, Unmapper>(static_cast<uint8_t*>(p), Unmapper{len});
}
}  // namespace

Result<InflightRegion> InflightRegion::create(uint16_t num_queues, uint16_t queue_size) {
  if (num_queues == 0 || !valid_queue_size(queue_size))
    return fail("vhost-user GET_INFLIGHT_FD", std::to_string(num_queues) + " queues of size " +
                                                  std::to_string(queue_size) + " is not valid");
  uint64_t per_queue = inflight_queue_region_bytes(queue_size);
  uint64_t len = per_queue * num_queues;
  int raw = ::memfd_create("tern-vhost-user-inflight", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (raw < 0) return fail_errno("memfd_create", "vhost-user inflight region");
  UniqueFd fd(raw);
  if (::ftruncate(fd.get(), static_cast<off_t>(len)) != 0)
    return fail_errno("ftruncate", "vhost-user inflight region");
  ASSIGN_OR_RETURN(auto map, map_shared(fd.get(), len, 0));
  for (uint16_t q = 0; q < num_queues; ++q) {
    auto* h = reinterpret_cast<QueueRegionSplit*>(map.get() + per_queue * q);
    h->version = kInflightVersion;
    h->desc_num = queue_size;
  }
  VhostUserInflight info;
  info.mmap_size = len;
  info.mmap_offset = 0;
  info.num_queues = num_queues;
  info.queue_size = queue_size;
  return InflightRegion(info, std::move(fd), std::move(map), 0);
}

Result<InflightRegion> InflightRegion::map(const VhostUserInflight& info, UniqueFd fd) {
  if (info.num_queues == 0 || !valid_queue_size(info.queue_size))
    return fail("vhost-user SET_INFLIGHT_FD", std::to_string(info.num_queues) + " queues of size " +
                                                  std::to_string(info.queue_size) + " is not valid");
  uint64_t need = inflight_queue_region_bytes(info.queue_size) * info.num_queues;
  auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  if (info.mmap_size < need || info.mmap_offset % page != 0 ||
      !checked_add(info.mmap_offset, info.mmap_size))
    return fail("vhost-user SET_INFLIGHT_FD", "mmap_size " + std::to_string(info.mmap_size) +
                                                  " at offset " + std::to_string(info.mmap_offset) +
                                                  " does not hold " + std::to_string(need) + " bytes");
  struct stat st{};
  if (::fstat(fd.get(), &st) != 0) return fail_errno("fstat", "vhost-user inflight fd");
  if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) < info.mmap_offset + need)
    return fail("vhost-user SET_INFLIGHT_FD", "the fd holds " + std::to_string(st.st_size) + " bytes");
  ASSIGN_OR_RETURN(auto map, map_shared(fd.get(), need, info.mmap_offset));
  return InflightRegion(info, std::move(fd), std::move(map), 0);
}

uint8_t* InflightRegion::queue(uint16_t q) const {
  TERN_CHECK(q < info_.num_queues);
  return map_.get() + offset_ + inflight_queue_region_bytes(info_.queue_size) * q;
}

std::vector<uint16_t> InflightQueue::recover(const GuestMemory& mem, uint64_t used_ring_gpa,
                                             uint16_t ring_used_idx, uint16_t& next_avail) {
  QueueRegionSplit* h = hdr();
  if (h->version == 0) {  // never used: initialize (libvhost-user does the same)
    h->version = kInflightVersion;
    h->desc_num = size_;
    h->used_idx = ring_used_idx;
    return {};
  }
  h->desc_num = size_;
  if (h->used_idx != ring_used_idx) {
    // The previous back-end published used->idx but died before clearing the batch it returned:
    // those chains are done. Clear every head in the used ring between the two indices (the
    // spec's last_batch_head names only the last of them).
    auto gap = static_cast<uint16_t>(ring_used_idx - h->used_idx);
    if (gap <= size_) {
      for (uint16_t i = h->used_idx; i != ring_used_idx; ++i) {
        auto e = mem.read_obj<virtio::VirtqUsedElem>(used_ring_gpa +
                                                     virtio::used_ring_offset(i % size_));
        if (e && e->id < size_) desc(static_cast<uint16_t>(e->id))->inflight = 0;
      }
    } else if (h->last_batch_head < size_) {
      desc(h->last_batch_head)->inflight = 0;
    }
    std::atomic_thread_fence(std::memory_order_seq_cst);
    h->used_idx = ring_used_idx;
  }
  std::vector<std::pair<uint64_t, uint16_t>> live;
  for (uint16_t i = 0; i < size_; ++i) {
    if (desc(i)->inflight == 1) live.emplace_back(desc(i)->counter, i);
  }
  std::sort(live.begin(), live.end());
  std::vector<uint16_t> heads;
  for (auto [c, i] : live) heads.push_back(i);
  counter_ = live.empty() ? 0 : live.back().first + 1;
  next_avail = static_cast<uint16_t>(ring_used_idx + heads.size());
  return heads;
}

void InflightQueue::on_pop(uint16_t head) {
  if (head >= size_) return;
  desc(head)->counter = counter_++;
  // The counter must be visible no later than the flag that makes it meaningful.
  std::atomic_thread_fence(std::memory_order_release);
  desc(head)->inflight = 1;
}

void InflightQueue::on_before_publish(uint16_t) {
  if (!batch_.empty()) hdr()->last_batch_head = batch_.back();
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

void InflightQueue::on_published(uint16_t used_idx) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  for (uint16_t head : batch_) {
    if (head < size_) desc(head)->inflight = 0;
  }
  batch_.clear();
  std::atomic_thread_fence(std::memory_order_seq_cst);
  hdr()->used_idx = used_idx;
}

}  // namespace tern::vhost_user
