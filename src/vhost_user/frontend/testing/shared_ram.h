// SharedRam: guest RAM for the front-end's tests as a vhost-user back-end needs it: two memfd
// regions (like RAM below and above the PCI hole), MAP_SHARED, each with MemoryRegion::fd set,
// wrapped by GuestMemory::wrap. Plus a test's helpers around it: queue configs and kick fds.
#pragma once

#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <vector>

#include "base/fd.h"
#include "memory/guest_memory.h"
#include "virtio/virtio_device.h"
#include "virtio/virtio_spec.h"

namespace tern::vhost_user::testing {

class SharedRam {
 public:
  static constexpr uint64_t kSize = 1 << 20;
  static constexpr uint64_t kHighGpa = 2 << 20;

  SharedRam() : low_(make(kSize)), high_(make(kSize)), mem_(wrap()) {}
  ~SharedRam() {
    ::munmap(low_.host, kSize);
    ::munmap(high_.host, kSize);
  }
  SharedRam(const SharedRam&) = delete;
  SharedRam& operator=(const SharedRam&) = delete;

  [[nodiscard]] const GuestMemory& mem() const { return mem_; }
  [[nodiscard]] int fd(int i) const { return i == 0 ? low_.fd.get() : high_.fd.get(); }
  [[nodiscard]] uint8_t* host(int i) const { return i == 0 ? low_.host : high_.host; }

  /// Queue `i` of `size`: rings at 64 KiB × (i + 1), used ring page-aligned.
  [[nodiscard]] static VirtqueueConfig queue(uint16_t i, uint16_t size = 256) {
    VirtqueueConfig q;
    q.size = size;
    q.desc_gpa = 0x10000ull * (i + 1);
    q.avail_gpa = q.desc_gpa + 16ull * size;
    q.used_gpa = (q.avail_gpa + virtio::avail_ring_bytes(size) + 4095) & ~4095ull;
    q.enabled = true;
    return q;
  }
  /// Sets queue `q`'s used->idx as if the back-end had completed `idx` requests.
  void set_used_idx(const VirtqueueConfig& q, uint16_t idx) const {
    (void)mem_.write_obj<uint16_t>(q.used_gpa + virtio::used_idx_offset(), idx);
  }

  static std::vector<UniqueFd> kicks(size_t n) {
    std::vector<UniqueFd> k;
    for (size_t i = 0; i < n; ++i) k.push_back(make_eventfd(0, EFD_NONBLOCK).value());
    return k;
  }

 private:
  struct Region {
    UniqueFd fd;
    uint8_t* host = nullptr;
  };
  static Region make(uint64_t size) {
    Region r;
    r.fd = UniqueFd(::memfd_create("tern-test-ram", MFD_CLOEXEC));
    TERN_CHECK(r.fd.valid() && ::ftruncate(r.fd.get(), static_cast<off_t>(size)) == 0);
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, r.fd.get(), 0);
    TERN_CHECK(p != MAP_FAILED);
    r.host = static_cast<uint8_t*>(p);
    return r;
  }
  GuestMemory wrap() {
    MemoryRegion lo{0, kSize, low_.host, 0, low_.fd.get()};
    MemoryRegion hi{kHighGpa, kSize, high_.host, kSize, high_.fd.get()};
    return GuestMemory::wrap({lo, hi});
  }

  Region low_, high_;
  GuestMemory mem_;
};

}  // namespace tern::vhost_user::testing
