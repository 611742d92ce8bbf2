// Test helpers (unit tests and fuzzers only): a fake guest whose RAM is a plain buffer wrapped by
// GuestMemory::wrap(), a driver that builds split virtqueues in it, and a VirtioInterrupt that
// records notifications and lets a test wait for them (condition variable + timeout; the timeout
// fails the test instead of hanging it).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "memory/guest_memory.h"
#include "virtio/virtio_device.h"
#include "virtio/virtio_spec.h"

namespace tern::testing {

/// Guest RAM for tests: two regions with a hole between them (like RAM below and above the
/// 32-bit PCI hole). Host buffers are 4 KiB aligned so O_DIRECT works on aligned guest buffers.
class FakeGuestRam {
 public:
  static constexpr uint64_t kLowSize = 1 << 20;       // [0, 1 MiB)
  static constexpr uint64_t kHoleStart = kLowSize;    // [1 MiB, 2 MiB) is not RAM
  static constexpr uint64_t kHighGpa = 2 << 20;       // [2 MiB, 3 MiB)
  static constexpr uint64_t kHighSize = 1 << 20;

  FakeGuestRam()
      : low_(static_cast<uint8_t*>(std::aligned_alloc(4096, kLowSize))),
        high_(static_cast<uint8_t*>(std::aligned_alloc(4096, kHighSize))),
        mem_(GuestMemory::wrap({MemoryRegion{0, kLowSize, low_.get(), 0},
                                MemoryRegion{kHighGpa, kHighSize, high_.get(), 0}})) {
    std::memset(low_.get(), 0, kLowSize);
    std::memset(high_.get(), 0, kHighSize);
  }
  [[nodiscard]] const GuestMemory& mem() const { return mem_; }
  /// Host pointer of a GPA known to be RAM (test code only).
  uint8_t* at(uint64_t gpa) { return mem_.slice(gpa, 1).value().data(); }

 private:
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> low_, high_;
  GuestMemory mem_;
};

/// Driver side of one split virtqueue laid out in FakeGuestRam.
class FakeVirtqueueDriver {
 public:
  struct Buf {
    uint64_t gpa = 0;
    uint32_t len = 0;
    bool writable = false;
  };

  /// Rings at `base` (desc table, then avail at +16*size rounded, used at +4 KiB multiples).
  FakeVirtqueueDriver(const GuestMemory& mem, uint64_t base, uint16_t size)
      : mem_(mem), size_(size) {
    config_.size = size;
    config_.desc_gpa = base;
    config_.avail_gpa = base + 16ull * size;
    config_.used_gpa = (config_.avail_gpa + virtio::avail_ring_bytes(size) + 4095) & ~4095ull;
    config_.enabled = true;
  }

  [[nodiscard]] const VirtqueueConfig& config() const { return config_; }
  /// First GPA after the rings.
  [[nodiscard]] uint64_t end() const { return config_.used_gpa + virtio::used_ring_bytes(size_); }

  /// Writes descriptor `i` verbatim.
  void write_desc(uint16_t i, uint64_t addr, uint32_t len, uint16_t flags, uint16_t next) {
    (void)mem_.write_obj(config_.desc_gpa + 16ull * i, virtio::VirtqDesc{addr, len, flags, next});
  }
  /// Writes an indirect table at `table_gpa` for `bufs` (linked with NEXT).
  void write_indirect_table(uint64_t table_gpa, const std::vector<Buf>& bufs) {
    for (size_t i = 0; i < bufs.size(); ++i) {
      uint16_t flags = (bufs[i].writable ? virtio::VIRTQ_DESC_F_WRITE : 0) |
                       (i + 1 < bufs.size() ? virtio::VIRTQ_DESC_F_NEXT : 0);
      (void)mem_.write_obj(table_gpa + 16 * i,
                           virtio::VirtqDesc{bufs[i].gpa, bufs[i].len, flags,
                                             static_cast<uint16_t>(i + 1)});
    }
  }
  /// Builds a direct chain from free descriptors and makes it available; returns the head.
  uint16_t add_chain(const std::vector<Buf>& bufs) {
    uint16_t head = next_desc_;
    for (size_t i = 0; i < bufs.size(); ++i) {
      uint16_t idx = next_desc_;
      next_desc_ = static_cast<uint16_t>((next_desc_ + 1) % size_);
      uint16_t flags = (bufs[i].writable ? virtio::VIRTQ_DESC_F_WRITE : 0) |
                       (i + 1 < bufs.size() ? virtio::VIRTQ_DESC_F_NEXT : 0);
      write_desc(idx, bufs[i].gpa, bufs[i].len, flags, next_desc_);
    }
    push_avail(head);
    return head;
  }
  /// Uses descriptor `head` (already written) as an indirect descriptor for `table_gpa`.
  uint16_t add_indirect(uint64_t table_gpa, const std::vector<Buf>& bufs) {
    write_indirect_table(table_gpa, bufs);
    uint16_t head = next_desc_;
    next_desc_ = static_cast<uint16_t>((next_desc_ + 1) % size_);
    write_desc(head, table_gpa, static_cast<uint32_t>(16 * bufs.size()),
               virtio::VIRTQ_DESC_F_INDIRECT, 0);
    push_avail(head);
    return head;
  }
  /// Puts `head` in the next available slot and publishes avail->idx.
  void push_avail(uint16_t head) {
    (void)mem_.write_obj(config_.avail_gpa + virtio::avail_ring_offset(avail_idx_ % size_), head);
    ++avail_idx_;
    set_avail_idx(avail_idx_);
  }
  /// Writes avail->idx directly (hostile tests).
  void set_avail_idx(uint16_t idx) {
    std::atomic_thread_fence(std::memory_order_release);
    (void)mem_.write_obj(config_.avail_gpa + virtio::avail_idx_offset(), idx);
  }
  void set_avail_flags(uint16_t flags) { (void)mem_.write_obj(config_.avail_gpa, flags); }
  void set_used_event(uint16_t v) {
    (void)mem_.write_obj(config_.avail_gpa + virtio::used_event_offset(size_), v);
  }
  [[nodiscard]] uint16_t avail_event() const {
    return mem_.read_obj<uint16_t>(config_.used_gpa + virtio::avail_event_offset(size_)).value();
  }
  [[nodiscard]] uint16_t used_idx() const {
    auto v = mem_.read_obj<uint16_t>(config_.used_gpa + virtio::used_idx_offset()).value();
    std::atomic_thread_fence(std::memory_order_acquire);
    return v;
  }
  [[nodiscard]] virtio::VirtqUsedElem used_elem(uint16_t i) const {
    return mem_
        .read_obj<virtio::VirtqUsedElem>(config_.used_gpa + virtio::used_ring_offset(i % size_))
        .value();
  }
  [[nodiscard]] uint16_t avail_idx() const { return avail_idx_; }

 private:
  const GuestMemory& mem_;
  uint16_t size_;
  VirtqueueConfig config_;
  uint16_t next_desc_ = 0;
  uint16_t avail_idx_ = 0;
};

/// Records interrupts; wait_until() blocks on a condition variable until a predicate holds or the
/// timeout passes (then returns false so the test fails rather than hangs).
class FakeVirtioInterrupt final : public VirtioInterrupt {
 public:
  void signal_used_queue(uint16_t queue) override {
    std::lock_guard lock(mu_);
    if (queue >= used_.size()) used_.resize(queue + 1);
    ++used_[queue];
    cv_.notify_all();
  }
  void signal_config_change() override {
    std::lock_guard lock(mu_);
    ++config_changes_;
    cv_.notify_all();
  }
  void set_needs_reset() override {
    std::lock_guard lock(mu_);
    needs_reset_ = true;
    cv_.notify_all();
  }
  [[nodiscard]] bool wait_until(const std::function<bool()>& pred,
                                std::chrono::seconds timeout = std::chrono::seconds(20)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return pred(); });
  }
  /// Waits until set_needs_reset() was called (false on timeout).
  [[nodiscard]] bool wait_needs_reset(std::chrono::seconds timeout = std::chrono::seconds(20)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return needs_reset_; });
  }
  [[nodiscard]] bool needs_reset() const {
    std::lock_guard lock(mu_);
    return needs_reset_;
  }
  [[nodiscard]] uint64_t used_signals(uint16_t queue) const {
    std::lock_guard lock(mu_);
    return queue < used_.size() ? used_[queue] : 0;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<uint64_t> used_;
  uint64_t config_changes_ = 0;
  bool needs_reset_ = false;
};

}  // namespace tern::testing
