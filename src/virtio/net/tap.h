// Tap: a Linux tap interface opened by name through /dev/net/tun (linux/if_tun.h,
// Documentation/networking/tuntap.rst), one fd per virtio-net queue pair. Every fd is
// IFF_TAP | IFF_NO_PI | IFF_VNET_HDR (IFF_MULTI_QUEUE when the tap has more than one queue),
// O_NONBLOCK, with a vnet header of kNetHdrSize bytes (TUNSETVNETHDRSZ), so a frame read or
// written is exactly a virtio-net buffer (virtio 1.2 §5.1.6). TUNSETOFFLOAD says which offloaded
// (partial-checksum / GSO) frames the kernel may hand us; which TUN_F_* flags the tap accepts is
// probed at open. TUNSETQUEUE attaches/detaches one queue (multiqueue steering, §5.1.6.5.5).
//
// Thread-safety: fd(), name(), pairs(), supported_offloads() and stat() may be called from any
// thread; set_offloads() / set_attached() from one thread at a time (the device serializes them).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/fd.h"
#include "base/result.h"

namespace tern::net {

/// See the file comment.
class Tap {
 public:
  /// Opens `name` with `pairs` fds (1..kMaxNetQueuePairs). With 1 pair the tap is opened single
  /// queue and, if the kernel refuses that (EINVAL: the tap was created multi_queue), again with
  /// IFF_MULTI_QUEUE. Every queue starts attached, with offloads 0. Errors have op
  /// "host_dev_name" and explain the errno (ENOENT: no /dev/net/tun, EBUSY: attached elsewhere,
  /// EPERM: not the tap's owner / no CAP_NET_ADMIN, EINVAL: multi_queue mismatch).
  [[nodiscard]] static Result<Tap> open(const std::string& name, uint16_t pairs);
  /// Tests only: wraps `fds` (e.g. socketpair(AF_UNIX, SOCK_SEQPACKET) ends) as a tap named
  /// `name` that accepts `supported_offloads`; the ioctls are skipped (recorded only).
  [[nodiscard]] static Tap from_fds(std::string name, std::vector<UniqueFd> fds,
                                    unsigned supported_offloads, bool multi_queue);

  [[nodiscard]] const std::string& name() const { return name_; }
  /// Queue pairs (fds).
  [[nodiscard]] uint16_t pairs() const { return static_cast<uint16_t>(fds_.size()); }
  /// The fd of queue pair `k` (k < pairs()).
  [[nodiscard]] BorrowedFd fd(uint16_t k) const { return fds_[k].borrow(); }
  /// Every queue's fd, pair order.
  [[nodiscard]] std::vector<BorrowedFd> fds() const;
  /// True if opened with IFF_MULTI_QUEUE (queues can be attached and detached).
  [[nodiscard]] bool multi_queue() const { return multi_queue_; }
  /// TUN_F_* flags TUNSETOFFLOAD accepted when probed at open (TUN_F_CSUM, TUN_F_TSO4,
  /// TUN_F_TSO6, TUN_F_TSO_ECN, TUN_F_UFO).
  [[nodiscard]] unsigned supported_offloads() const { return supported_; }

  /// TUNSETOFFLOAD(`tun_flags`) on every fd (the offload state is the tap's, but a queue's fd
  /// may be the only one still valid). `tun_flags` must be a subset of supported_offloads().
  /// Errors name the tap and the fd that failed; the others are still set.
  [[nodiscard]] Result<void> set_offloads(unsigned tun_flags);
  /// The flags of the last set_offloads() (0 after open).
  [[nodiscard]] unsigned offloads() const { return offloads_; }
  /// TUNSETQUEUE IFF_ATTACH_QUEUE / IFF_DETACH_QUEUE on pair `k`'s fd; no-op if it is already
  /// in that state or the tap is single queue (always attached).
  [[nodiscard]] Result<void> set_attached(uint16_t k, bool attached);
  [[nodiscard]] bool attached(uint16_t k) const { return attached_[k]; }

  /// /sys/class/net/<name>/statistics/<counter> (e.g. "tx_dropped"), nullopt if unreadable.
  [[nodiscard]] std::optional<uint64_t> stat(std::string_view counter) const;

 private:
  Tap() = default;

  std::string name_;
  std::vector<UniqueFd> fds_;
  std::vector<bool> attached_;
  bool multi_queue_ = false;
  bool fake_ = false;  // from_fds(): no ioctls
  unsigned supported_ = 0;
  unsigned offloads_ = 0;
};

}  // namespace tern::net
