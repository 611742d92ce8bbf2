#include "virtio/net/vhost_net_fd.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/ioctl.h>

#include <cstring>

#include "virtio/net/net_header.h"
#include "virtio/virtio_spec.h"

// After tern's headers: linux/vhost.h defines VIRTIO_F_* macros (see vhost_net_fd.h); its
// legacy vring helpers (vring_init) are C, not C++.
#define VIRTIO_RING_NO_LEGACY
#include <linux/vhost.h>

namespace tern::net {

uint64_t vhost_net_ring_feature_mask() {
  return virtio::feature(VIRTIO_F_VERSION_1) | virtio::feature(VIRTIO_RING_F_EVENT_IDX) |
         virtio::feature(VIRTIO_RING_F_INDIRECT_DESC) | virtio::feature(VIRTIO_NET_F_MRG_RXBUF);
}

Result<uint64_t> vhost_net_features_to_set(uint64_t acked, uint64_t offered) {
  uint64_t want = acked & vhost_net_ring_feature_mask();
  if ((want & virtio::feature(VIRTIO_F_VERSION_1)) == 0)
    return fail("vhost-net features", "VIRTIO_F_VERSION_1 not acked");
  if (uint64_t missing = want & ~offered; missing != 0)
    return fail("vhost-net features",
                fmt::format("acked ring features {:#x} not served by VHOST_GET_FEATURES {:#x}",
                            missing, offered));
  return want;
}

std::vector<VhostMemoryRegion> vhost_memory_table(const GuestMemory& mem) {
  std::vector<VhostMemoryRegion> out;
  out.reserve(mem.regions().size());
  for (const MemoryRegion& r : mem.regions())
    out.push_back({r.gpa, r.size, reinterpret_cast<uintptr_t>(r.host)});
  return out;
}

namespace {

Result<uint64_t> ring_host_addr(const GuestMemory& mem, const char* ring, uint64_t gpa,
                                uint64_t bytes, uint64_t align) {
  if (gpa % align != 0)
    return fail("vhost-net vring", fmt::format("{} at {:#x} not {}-byte aligned", ring, gpa, align));
  auto s = mem.slice(gpa, bytes);
  if (!s)
    return fail("vhost-net vring",
                fmt::format("{} at {:#x} ({} bytes) not in guest RAM", ring, gpa, bytes));
  return reinterpret_cast<uintptr_t>(s->data());
}

}  // namespace

Result<VhostVringAddr> vring_host_addresses(const GuestMemory& mem, const VirtqueueConfig& q) {
  uint64_t n = q.size;
  if (n == 0 || n > 32768 || (n & (n - 1)) != 0)
    return fail("vhost-net vring", fmt::format("queue size {} is not a power of two", n));
  VhostVringAddr a;
  ASSIGN_OR_RETURN(a.desc_user_addr,
                   ring_host_addr(mem, "descriptor table", q.desc_gpa, 16 * n, 16));
  ASSIGN_OR_RETURN(a.avail_user_addr,
                   ring_host_addr(mem, "available ring", q.avail_gpa,
                                  virtio::avail_ring_bytes(n), 2));
  ASSIGN_OR_RETURN(a.used_user_addr, ring_host_addr(mem, "used ring", q.used_gpa,
                                                    virtio::used_ring_bytes(n), 4));
  return a;
}

Result<VhostNetFd> VhostNetFd::open(std::string name, uint16_t pair, const std::string& path) {
  auto fd = open_file(path, O_RDWR | O_CLOEXEC);
  if (!fd) {
    Error e = std::move(fd).error();
    e.context = e.op + ": " + e.context;
    e.op = name;
    return tl::unexpected(std::move(e));
  }
  return VhostNetFd(std::move(name), pair, std::move(*fd));
}

std::string VhostNetFd::vring_context(const char* ioctl, unsigned vring) const {
  return fmt::format("{}: queue {}", ioctl, 2u * pair_ + vring);
}

Result<void> VhostNetFd::set_owner() {
  if (::ioctl(fd_.get(), VHOST_SET_OWNER) < 0) return fail_errno(name_, "VHOST_SET_OWNER");
  return {};
}

Result<uint64_t> VhostNetFd::get_features() {
  uint64_t f = 0;
  if (::ioctl(fd_.get(), VHOST_GET_FEATURES, &f) < 0)
    return fail_errno(name_, "VHOST_GET_FEATURES");
  return f;
}

Result<void> VhostNetFd::set_features(uint64_t features) {
  if (::ioctl(fd_.get(), VHOST_SET_FEATURES, &features) < 0)
    return fail_errno(name_, fmt::format("VHOST_SET_FEATURES: {:#x}", features));
  return {};
}

Result<void> VhostNetFd::set_mem_table(std::span<const VhostMemoryRegion> regions) {
  // struct vhost_memory ends in a flexible array: build it in 8-byte-aligned storage.
  size_t bytes = sizeof(vhost_memory) + regions.size() * sizeof(vhost_memory_region);
  std::vector<uint64_t> storage((bytes + 7) / 8, 0);
  auto* table = reinterpret_cast<vhost_memory*>(storage.data());
  table->nregions = static_cast<uint32_t>(regions.size());
  for (size_t i = 0; i < regions.size(); ++i) {
    table->regions[i].guest_phys_addr = regions[i].guest_phys_addr;
    table->regions[i].memory_size = regions[i].memory_size;
    table->regions[i].userspace_addr = regions[i].userspace_addr;
    table->regions[i].flags_padding = 0;
  }
  if (::ioctl(fd_.get(), VHOST_SET_MEM_TABLE, table) < 0)
    return fail_errno(name_, fmt::format("VHOST_SET_MEM_TABLE: {} regions", regions.size()));
  return {};
}

Result<void> VhostNetFd::vring_state(unsigned long request, const char* ioctl, unsigned vring,
                                     unsigned num) {
  vhost_vring_state s{};
  s.index = vring;
  s.num = num;
  if (::ioctl(fd_.get(), request, &s) < 0) return fail_errno(name_, vring_context(ioctl, vring));
  return {};
}

Result<void> VhostNetFd::vring_file(unsigned long request, const char* ioctl, unsigned vring,
                                    BorrowedFd fd) {
  vhost_vring_file f{};
  f.index = vring;
  f.fd = fd.get();
  if (::ioctl(fd_.get(), request, &f) < 0) return fail_errno(name_, vring_context(ioctl, vring));
  return {};
}

Result<void> VhostNetFd::set_vring_num(unsigned vring, unsigned num) {
  return vring_state(VHOST_SET_VRING_NUM, "VHOST_SET_VRING_NUM", vring, num);
}

Result<void> VhostNetFd::set_vring_addr(unsigned vring, const VhostVringAddr& addr) {
  vhost_vring_addr a{};
  a.index = vring;
  a.flags = 0;  // no VHOST_VRING_F_LOG: no dirty logging
  a.desc_user_addr = addr.desc_user_addr;
  a.avail_user_addr = addr.avail_user_addr;
  a.used_user_addr = addr.used_user_addr;
  if (::ioctl(fd_.get(), VHOST_SET_VRING_ADDR, &a) < 0)
    return fail_errno(name_, vring_context("VHOST_SET_VRING_ADDR", vring));
  return {};
}

Result<void> VhostNetFd::set_vring_base(unsigned vring, uint16_t next_avail) {
  return vring_state(VHOST_SET_VRING_BASE, "VHOST_SET_VRING_BASE", vring, next_avail);
}

Result<uint16_t> VhostNetFd::get_vring_base(unsigned vring) {
  vhost_vring_state s{};
  s.index = vring;
  if (::ioctl(fd_.get(), VHOST_GET_VRING_BASE, &s) < 0)
    return fail_errno(name_, vring_context("VHOST_GET_VRING_BASE", vring));
  return static_cast<uint16_t>(s.num);
}

Result<void> VhostNetFd::set_vring_kick(unsigned vring, BorrowedFd kick) {
  return vring_file(VHOST_SET_VRING_KICK, "VHOST_SET_VRING_KICK", vring, kick);
}

Result<void> VhostNetFd::set_vring_call(unsigned vring, BorrowedFd call) {
  return vring_file(VHOST_SET_VRING_CALL, "VHOST_SET_VRING_CALL", vring, call);
}

Result<void> VhostNetFd::set_vring_err(unsigned vring, BorrowedFd err) {
  return vring_file(VHOST_SET_VRING_ERR, "VHOST_SET_VRING_ERR", vring, err);
}

Result<void> VhostNetFd::set_backend(unsigned vring, BorrowedFd tap) {
  return vring_file(VHOST_NET_SET_BACKEND, "VHOST_NET_SET_BACKEND", vring, tap);
}

}  // namespace tern::net
