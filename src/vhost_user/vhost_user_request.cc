// parse_request(): the back-end's validation of one front-end request (spec "Front-end message
// types"), from untrusted bytes to a Request value. Nothing here allocates more than the bounded
// message itself; every size, count and range is checked before a value is produced.
#include <cstdio>
#include <cstring>
#include <string>

#include "base/checked.h"
#include "vhost_user/vhost_user_internal.h"
#include "vhost_user/vhost_user_message.h"

namespace tern::vhost_user {

namespace {

/// The largest split virtqueue (virtio 1.2 §2.7 "Queue Size": at most 32768).
constexpr uint32_t kMaxQueueSize = 32768;

class RequestParser {
 public:
  explicit RequestParser(Message& m) : m_(m), op_("vhost-user " + short_request_name(m.hdr.request)) {}

  tl::unexpected<Error> bad(const std::string& what) const { return fail(op_, what); }

  /// The payload is exactly `size` bytes and `fds` fds came (fds_max: a range [fds, fds_max]).
  Result<void> expect(size_t size, size_t fds, size_t fds_max) const {
    if (m_.payload.size() != size)
      return bad("size " + std::to_string(m_.payload.size()) + ", expected " +
                 std::to_string(size));
    if (m_.fds.size() < fds || m_.fds.size() > fds_max)
      return bad(std::to_string(m_.fds.size()) + " fds, expected " + std::to_string(fds) +
                 (fds_max != fds ? " to " + std::to_string(fds_max) : ""));
    return {};
  }

  template <class T>
  Result<T> body(size_t fds = 0, size_t fds_max = SIZE_MAX) const {
    TRY(expect(sizeof(T), fds, fds_max == SIZE_MAX ? fds : fds_max));
    T v;
    std::memcpy(&v, m_.payload.data(), sizeof v);
    return v;
  }

  /// One memory region: non-zero size, no overflow of any of its three ranges.
  Result<void> check_region(const VhostUserMemoryRegion& r, const std::string& which) const {
    if (r.memory_size == 0) return bad(which + "memory_size 0");
    if (!checked_add(r.guest_phys_addr, r.memory_size))
      return bad(which + "guest_phys_addr + memory_size overflows");
    if (!checked_add(r.userspace_addr, r.memory_size))
      return bad(which + "userspace_addr + memory_size overflows");
    auto end = checked_add(r.mmap_offset, r.memory_size);
    if (!end || *end > uint64_t{INT64_MAX})
      return bad(which + "mmap_offset + memory_size overflows");
    return {};
  }

  Result<MemTable> mem_table() const {
    if (m_.payload.size() < offsetof(VhostUserMemory, regions))
      return bad("size " + std::to_string(m_.payload.size()) + ", shorter than nregions");
    uint32_t n;
    std::memcpy(&n, m_.payload.data(), sizeof n);
    if (n == 0 || n > VHOST_MEMORY_BASELINE_NREGIONS)
      return bad("nregions " + std::to_string(n) + ", expected 1 to 8");
    TRY(expect(offsetof(VhostUserMemory, regions) + n * sizeof(VhostUserMemoryRegion), n, n));
    MemTable t;
    t.regions.resize(n);
    std::memcpy(t.regions.data(), m_.payload.data() + offsetof(VhostUserMemory, regions),
                n * sizeof(VhostUserMemoryRegion));
    for (uint32_t i = 0; i < n; ++i) {
      const auto& a = t.regions[i];
      TRY(check_region(a, "region " + std::to_string(i) + ": "));
      for (uint32_t j = 0; j < i; ++j) {
        const auto& b = t.regions[j];
        if (a.guest_phys_addr < b.guest_phys_addr + b.memory_size &&
            b.guest_phys_addr < a.guest_phys_addr + a.memory_size)
          return bad("regions " + std::to_string(j) + " and " + std::to_string(i) +
                     " overlap in guest-physical addresses");
        if (a.userspace_addr < b.userspace_addr + b.memory_size &&
            b.userspace_addr < a.userspace_addr + a.memory_size)
          return bad("regions " + std::to_string(j) + " and " + std::to_string(i) +
                     " overlap in userspace addresses");
      }
    }
    return t;
  }

  Result<VringFd> vring_fd() const {
    TRY(expect(sizeof(uint64_t), 0, 1));
    uint64_t v;
    std::memcpy(&v, m_.payload.data(), sizeof v);
    if (v & ~(VHOST_USER_VRING_IDX_MASK | VHOST_USER_VRING_NOFD_MASK))
      return bad("unknown bits in 0x" + hex(v));
    VringFd f{static_cast<uint8_t>(v & VHOST_USER_VRING_IDX_MASK),
              !(v & VHOST_USER_VRING_NOFD_MASK)};
    TRY(expect(sizeof(uint64_t), f.has_fd ? 1 : 0, f.has_fd ? 1 : 0));
    return f;
  }

  Result<ConfigRequest> config(bool set) const {
    if (m_.payload.size() < sizeof(VhostUserConfigHeader))
      return bad("size " + std::to_string(m_.payload.size()) + ", shorter than the config header");
    ConfigRequest c;
    std::memcpy(&c.hdr, m_.payload.data(), sizeof c.hdr);
    if (c.hdr.size > VHOST_USER_MAX_CONFIG_SIZE)
      return bad("config size " + std::to_string(c.hdr.size) + ", more than 256");
    if (uint64_t{c.hdr.offset} + c.hdr.size > UINT32_MAX)
      return bad("config offset + size overflows");
    if (c.hdr.flags > 1) return bad("config flags " + std::to_string(c.hdr.flags));
    TRY(expect(sizeof c.hdr + c.hdr.size, 0, 0));
    if (set) c.data.assign(m_.payload.begin() + sizeof c.hdr, m_.payload.end());
    return c;
  }

  Result<VhostUserInflight> inflight(bool set) const {
    ASSIGN_OR_RETURN(auto i, body<VhostUserInflight>(set ? 1 : 0));
    if (i.num_queues == 0) return bad("num_queues 0");
    if (i.queue_size == 0 || i.queue_size > kMaxQueueSize)
      return bad("queue_size " + std::to_string(i.queue_size) + ", expected 1 to 32768");
    if (!set) return i;
    const uint64_t need = uint64_t{i.num_queues} * inflight_queue_region_bytes(i.queue_size);
    if (i.mmap_size < need)
      return bad("mmap_size " + std::to_string(i.mmap_size) + ", less than the " +
                 std::to_string(need) + " bytes the queues need");
    auto end = checked_add(i.mmap_offset, i.mmap_size);
    if (!end || *end > uint64_t{INT64_MAX}) return bad("mmap_offset + mmap_size overflows");
    return i;
  }

 private:
  static std::string hex(uint64_t v) {
    char b[20];
    std::snprintf(b, sizeof b, "%llx", static_cast<unsigned long long>(v));
    return b;
  }
  Message& m_;
  std::string op_;
};

}  // namespace

Result<Request> parse_request(Message msg) {
  RequestParser p(msg);
  const auto& h = msg.hdr;
  if ((h.flags & VHOST_USER_VERSION_MASK) != VHOST_USER_VERSION)
    return p.bad("version " + std::to_string(h.flags & VHOST_USER_VERSION_MASK) + ", expected 1");
  if (h.flags & VHOST_USER_REPLY_MASK) return p.bad("REPLY flag set on a request");
  if (h.size != msg.payload.size())
    return p.bad("header size " + std::to_string(h.size) + " but " +
                 std::to_string(msg.payload.size()) + " payload bytes");
  Request r;
  r.request = h.request;
  r.need_reply = h.flags & VHOST_USER_NEED_REPLY_MASK;
  switch (h.request) {
    case VHOST_USER_GET_FEATURES:
    case VHOST_USER_SET_OWNER:
    case VHOST_USER_RESET_OWNER:
    case VHOST_USER_GET_PROTOCOL_FEATURES:
    case VHOST_USER_GET_QUEUE_NUM:
    case VHOST_USER_GET_MAX_MEM_SLOTS:
    case VHOST_USER_RESET_DEVICE:
    case VHOST_USER_GET_STATUS:
      TRY(p.expect(0, 0, 0));
      r.body = NoBody{};
      break;
    case VHOST_USER_SET_FEATURES:
    case VHOST_USER_SET_PROTOCOL_FEATURES: {
      ASSIGN_OR_RETURN(r.body, p.body<uint64_t>());
      break;
    }
    case VHOST_USER_SET_STATUS: {
      ASSIGN_OR_RETURN(uint64_t s, p.body<uint64_t>());
      if (s > 0xff) return p.bad("status " + std::to_string(s) + " does not fit a byte");
      r.body = s;
      break;
    }
    case VHOST_USER_SET_MEM_TABLE: {
      ASSIGN_OR_RETURN(r.body, p.mem_table());
      break;
    }
    case VHOST_USER_ADD_MEM_REG:
    case VHOST_USER_REM_MEM_REG: {
      // REM_MEM_REG SHOULD come without an fd; one is accepted (older QEMU) and closed.
      const bool add = h.request == VHOST_USER_ADD_MEM_REG;
      ASSIGN_OR_RETURN(auto reg, p.body<VhostUserMemRegMsg>(add ? 1 : 0, 1));
      TRY(p.check_region(reg.region, ""));
      if (!add) msg.fds.clear();
      r.body = reg;
      break;
    }
    case VHOST_USER_SET_VRING_NUM: {
      ASSIGN_OR_RETURN(auto s, p.body<VhostVringState>());
      if (s.num == 0 || s.num > kMaxQueueSize)
        return p.bad("vring " + std::to_string(s.index) + ": num " + std::to_string(s.num) +
                     ", expected 1 to 32768");
      r.body = s;
      break;
    }
    case VHOST_USER_SET_VRING_BASE: {
      ASSIGN_OR_RETURN(auto s, p.body<VhostVringState>());
      if (s.num > 0xffff)
        return p.bad("vring " + std::to_string(s.index) + ": base " + std::to_string(s.num) +
                     " does not fit 16 bits");
      r.body = s;
      break;
    }
    case VHOST_USER_GET_VRING_BASE: {
      ASSIGN_OR_RETURN(r.body, p.body<VhostVringState>());
      break;
    }
    case VHOST_USER_SET_VRING_ENABLE: {
      ASSIGN_OR_RETURN(auto s, p.body<VhostVringState>());
      if (s.num > 1)
        return p.bad("vring " + std::to_string(s.index) + ": enable " + std::to_string(s.num) +
                     ", expected 0 or 1");
      r.body = s;
      break;
    }
    case VHOST_USER_SET_VRING_ADDR: {
      ASSIGN_OR_RETURN(auto a, p.body<VhostVringAddr>());
      if (a.flags & ~1u) return p.bad("vring " + std::to_string(a.index) + ": unknown flags " +
                                      std::to_string(a.flags));
      r.body = a;
      break;
    }
    case VHOST_USER_SET_VRING_KICK:
    case VHOST_USER_SET_VRING_CALL:
    case VHOST_USER_SET_VRING_ERR: {
      ASSIGN_OR_RETURN(r.body, p.vring_fd());
      break;
    }
    case VHOST_USER_GET_CONFIG:
    case VHOST_USER_SET_CONFIG: {
      ASSIGN_OR_RETURN(r.body, p.config(h.request == VHOST_USER_SET_CONFIG));
      break;
    }
    case VHOST_USER_GET_INFLIGHT_FD:
    case VHOST_USER_SET_INFLIGHT_FD: {
      ASSIGN_OR_RETURN(r.body, p.inflight(h.request == VHOST_USER_SET_INFLIGHT_FD));
      break;
    }
    case VHOST_USER_SET_LOG_BASE:
    case VHOST_USER_SET_LOG_FD:
    case VHOST_USER_SEND_RARP:
    case VHOST_USER_NET_SET_MTU:
    case VHOST_USER_SET_BACKEND_REQ_FD:
    case VHOST_USER_IOTLB_MSG:
    case VHOST_USER_SET_VRING_ENDIAN:
      return p.bad("not supported");  // its fds close with `msg`
    default:
      return p.bad("unknown request");
  }
  r.fds = std::move(msg.fds);
  return r;
}

}  // namespace tern::vhost_user
