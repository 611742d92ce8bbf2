#include "virtio/net/tap.h"

#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <sys/ioctl.h>

#include <charconv>
#include <cstring>

#include "base/log.h"
#include "virtio/net/net_header.h"

namespace tern::net {

namespace {

constexpr const char* kTunPath = "/dev/net/tun";

// What an errno from opening or attaching a tap usually means, for the error message.
std::string explain(int err, bool multi_queue) {
  switch (err) {
    case ENOENT:
      return "ENOENT: no /dev/net/tun (modprobe tun)";
    case EBUSY:
      return "EBUSY: the tap is attached to another process";
    case EPERM:
    case EACCES:
      return "EPERM: not the tap's owner or group, and no CAP_NET_ADMIN";
    case EINVAL:
      return multi_queue ? "EINVAL: the tap was created without multi_queue "
                           "(ip tuntap add dev NAME mode tap multi_queue)"
                         : "EINVAL: the device exists but is not a tap (e.g. a NIC), or was "
                           "created multi_queue with flags tern cannot match";
    default:
      return {};
  }
}

tl::unexpected<Error> tap_error(int err, const std::string& name, const std::string& what,
                                bool multi_queue) {
  std::string why = explain(err, multi_queue);
  return fail_code(err, "host_dev_name",
                   name + ": " + what + (why.empty() ? "" : " (" + why + ")"));
}

// One queue: open /dev/net/tun and TUNSETIFF `name` with `flags`. Returns the fd, or the
// errno of the failing step with what failed.
struct OpenError {
  int err;
  std::string what;
};
tl::expected<UniqueFd, OpenError> open_queue(const std::string& name, short flags) {
  int raw = ::open(kTunPath, O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (raw < 0) return tl::unexpected(OpenError{errno, kTunPath});
  UniqueFd fd(raw);
  ifreq ifr{};
  std::memcpy(ifr.ifr_name, name.data(), std::min<size_t>(name.size(), IFNAMSIZ - 1));
  ifr.ifr_flags = flags;
  if (::ioctl(fd.get(), TUNSETIFF, &ifr) != 0) return tl::unexpected(OpenError{errno, "TUNSETIFF"});
  int hdr = static_cast<int>(kNetHdrSize);
  if (::ioctl(fd.get(), TUNSETVNETHDRSZ, &hdr) != 0)
    return tl::unexpected(OpenError{errno, "TUNSETVNETHDRSZ"});
  return fd;
}

// The TUN_F_* flags TUNSETOFFLOAD accepts on `fd` (the kernel refuses unknown or unsupported
// flags with EINVAL; TSO, ECN and UFO need TUN_F_CSUM, ECN needs TSO). Leaves offloads 0.
unsigned probe_offloads(int fd) {
  auto accepts = [&](unsigned f) { return ::ioctl(fd, TUNSETOFFLOAD, f) == 0; };
  unsigned supported = 0;
  if (accepts(TUN_F_CSUM)) {
    supported |= TUN_F_CSUM;
    for (unsigned f : {TUN_F_TSO4, TUN_F_TSO6, TUN_F_UFO})
      if (accepts(TUN_F_CSUM | f)) supported |= f;
    if ((supported & TUN_F_TSO4) && accepts(TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO_ECN))
      supported |= TUN_F_TSO_ECN;
  }
  (void)::ioctl(fd, TUNSETOFFLOAD, 0u);
  return supported;
}

}  // namespace

Result<Tap> Tap::open(const std::string& name, uint16_t pairs) {
  if (name.empty() || name.size() >= IFNAMSIZ)
    return fail("host_dev_name", "'" + name + "': must be 1.." + std::to_string(IFNAMSIZ - 1) +
                                     " bytes");
  if (pairs == 0) return fail("host_dev_name", name + ": no queue pair");
  if (::if_nametoindex(name.c_str()) == 0)
    spdlog::warn("host_dev_name: tap {} does not exist: /dev/net/tun creates it (down, no "
                 "address, gone when tern exits)", name);
  Tap tap;
  tap.name_ = name;
  tap.multi_queue_ = pairs > 1;
  const short base = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
  for (uint16_t k = 0; k < pairs; ++k) {
    auto fd = open_queue(name, static_cast<short>(base | (tap.multi_queue_ ? IFF_MULTI_QUEUE : 0)));
    if (!fd && k == 0 && pairs == 1 && fd.error().err == EINVAL && fd.error().what == "TUNSETIFF") {
      // A tap created multi_queue (ip tuntap ... multi_queue) only opens with IFF_MULTI_QUEUE.
      tap.multi_queue_ = true;
      fd = open_queue(name, static_cast<short>(base | IFF_MULTI_QUEUE));
    }
    if (!fd) {
      std::string what = fd.error().what;
      if (pairs > 1) what += " (queue " + std::to_string(k) + " of " + std::to_string(pairs) + ")";
      return tap_error(fd.error().err, name, what, pairs > 1);
    }
    tap.fds_.push_back(std::move(*fd));
    tap.attached_.push_back(true);
  }
  tap.supported_ = probe_offloads(tap.fds_[0].get());
  return tap;
}

Tap Tap::from_fds(std::string name, std::vector<UniqueFd> fds, unsigned supported_offloads,
                  bool multi_queue) {
  Tap tap;
  tap.name_ = std::move(name);
  tap.fds_ = std::move(fds);
  tap.attached_.assign(tap.fds_.size(), true);
  tap.multi_queue_ = multi_queue;
  tap.fake_ = true;
  tap.supported_ = supported_offloads;
  return tap;
}

std::vector<BorrowedFd> Tap::fds() const {
  std::vector<BorrowedFd> v;
  for (const auto& f : fds_) v.push_back(f.borrow());
  return v;
}

Result<void> Tap::set_offloads(unsigned tun_flags) {
  TERN_CHECK((tun_flags & ~supported_) == 0);
  offloads_ = tun_flags;
  if (fake_) return {};
  Result<void> first_error;
  for (size_t k = 0; k < fds_.size(); ++k) {
    if (::ioctl(fds_[k].get(), TUNSETOFFLOAD, tun_flags) == 0) continue;
    if (first_error)
      first_error = fail_errno("TUNSETOFFLOAD", name_ + " (queue " + std::to_string(k) + ")");
  }
  return first_error;
}

Result<void> Tap::set_attached(uint16_t k, bool attached) {
  TERN_CHECK(k < fds_.size());
  if (attached_[k] == attached || !multi_queue_) return {};
  if (!fake_) {
    ifreq ifr{};
    ifr.ifr_flags = static_cast<short>(attached ? IFF_ATTACH_QUEUE : IFF_DETACH_QUEUE);
    if (::ioctl(fds_[k].get(), TUNSETQUEUE, &ifr) != 0)
      return tap_error(errno, name_,
                       std::string("TUNSETQUEUE ") +
                           (attached ? "IFF_ATTACH_QUEUE" : "IFF_DETACH_QUEUE") + " (queue " +
                           std::to_string(k) + ")",
                       true);
  }
  attached_[k] = attached;
  return {};
}

std::optional<uint64_t> Tap::stat(std::string_view counter) const {
  if (fake_) return std::nullopt;
  // sysfs attributes report st_size 4096: read_file() would refuse them; one read suffices.
  std::string path = "/sys/class/net/" + name_ + "/statistics/" + std::string(counter);
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return std::nullopt;
  char buf[32];
  ssize_t n = retry_eintr([&] { return ::read(fd.get(), buf, sizeof buf); });
  if (n <= 0) return std::nullopt;
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(buf, buf + n, v);
  if (ec != std::errc()) return std::nullopt;
  return v;
}

}  // namespace tern::net
