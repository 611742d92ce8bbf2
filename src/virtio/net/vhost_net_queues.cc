// start_vhost_net(): one vhost-net instance (VhostNetFd) per queue pair, with the call relay
// for every vring's call and error eventfds. The kernel behaviour this depends on
// (drivers/vhost/vhost.c, net.c) is written next to the code that relies on it.
#include "virtio/net/vhost_net_queues.h"

#include <fmt/format.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <optional>
#include <utility>

#include "base/log.h"
#include "virtio/net/vhost_net_fd.h"
#include "virtio/vhost_call_relay.h"
#include "virtio/virtio_spec.h"

namespace tern::net {

namespace {

using virtio::ExternalQueue;
using virtio::ExternalQueues;
using virtio::VhostCallRelay;

// VHOST_NET_VQ_RX = 0, VHOST_NET_VQ_TX = 1 (drivers/vhost/net.c): device queue 2k + v is vring
// v of pair k's instance.
constexpr unsigned kVringsPerPair = 2;

struct Vring {
  uint16_t queue = 0;  // device queue index
  unsigned index = 0;  // vring index in the instance
  VirtqueueConfig config;
  VhostVringAddr addr;
  UniqueFd kick;
  UniqueFd call;          // our call eventfd, relayed: vhost's call fd while not direct
  uint64_t watch = 0;     // VirtioInterrupt::watch_queue_irqfd id (0: always relayed)
  bool direct = false;    // vhost's call fd is the vector's irqfd (set under the MSI-X lock)
  UniqueFd err;           // our error eventfd (VHOST_SET_VRING_ERR), watched by the relay
  bool backend = false;   // the tap is attached (VHOST_NET_SET_BACKEND fd, not yet -1)
};

struct Instance {
  uint16_t pair = 0;
  BorrowedFd tap{-1};
  std::optional<VhostNetFd> fd;
  std::vector<Vring> vrings;
};

class VhostNetQueues final : public ExternalQueues {
 public:
  VhostNetQueues(const GuestMemory& mem, std::shared_ptr<VirtioInterrupt> interrupt,
                 std::string name, VhostNetObserver observer)
      : mem_(mem),
        interrupt_(std::move(interrupt)),
        name_(std::move(name)),
        observer_(std::move(observer)) {}

  // Destroy = stop + close: the backends go first (synchronous, see remove_backends()), so
  // nothing touches guest memory or the call fds once this returns; then the relay thread
  // stops and the vhost fds, kick and call eventfds close (member order).
  ~VhostNetQueues() override {
    unwatch();  // no mask notifier runs (nor touches a vhost fd) after this
    remove_backends();
    relay_.reset();
  }

  Result<void> start(uint64_t acked, std::vector<ExternalQueue> queues,
                     std::vector<BorrowedFd> taps);
  std::vector<std::pair<uint16_t, QueuePosition>> pause() override;
  Result<void> resume() override;
  void sync_counters() override {
    if (relay_) relay_->account_used_now();
  }

 private:
  Result<void> setup_instance(Instance& in, uint64_t acked,
                              const std::vector<VhostMemoryRegion>& table);
  Result<void> attach_backends();
  void remove_backends();
  Result<void> start_relay();
  void watch();
  void unwatch();
  void switch_call(VhostNetFd& fd, Vring& r, BorrowedFd irqfd);  // under the MSI-X lock
  void vring_error(uint16_t queue);  // relay thread: vhost refused a chain of `queue`

  const GuestMemory& mem_;
  const std::shared_ptr<VirtioInterrupt> interrupt_;
  const std::string name_;
  const VhostNetObserver observer_;
  std::atomic<bool> error_logged_{false};
  RateLimit log_limit_;
  std::vector<Instance> instances_;
  std::unique_ptr<VhostCallRelay> relay_;  // declared after instances_: destroyed first
  bool paused_ = false;
  std::vector<std::pair<uint16_t, QueuePosition>> paused_at_;
};

Result<void> VhostNetQueues::start(uint64_t acked, std::vector<ExternalQueue> queues,
                                   std::vector<BorrowedFd> taps) {
  // Validate everything first (queue → pair mapping, ring addresses), then talk to the kernel.
  if (queues.empty()) return fail(name_, "vhost-net: no queue to serve");
  for (size_t k = 0; k < taps.size(); ++k)
    if (taps[k].get() < 0) return fail(name_, fmt::format("vhost-net: no tap for pair {}", k));
  int last = -1;
  for (ExternalQueue& q : queues) {
    uint16_t pair = q.index / kVringsPerPair;
    if (pair >= taps.size())
      return fail(name_, fmt::format("vhost-net: queue {} has no tap ({} pairs)", q.index,
                                     taps.size()));
    if (static_cast<int>(q.index) <= last)
      return fail(name_, fmt::format("vhost-net: queue {} out of order", q.index));
    last = q.index;
    if (!q.kick.valid()) return fail(name_, fmt::format("queue {}: no kick eventfd", q.index));
    auto addr = vring_host_addresses(mem_, q.config);
    if (!addr) return fail(name_, fmt::format("queue {}: {}", q.index, addr.error().message()));
    if (instances_.empty() || instances_.back().pair != pair) {
      instances_.emplace_back();
      instances_.back().pair = pair;
      instances_.back().tap = taps[pair];
    }
    Vring v;
    v.queue = q.index;
    v.index = q.index % kVringsPerPair;
    v.config = q.config;
    v.addr = *addr;
    v.kick = std::move(q.kick);
    instances_.back().vrings.push_back(std::move(v));
  }
  const std::vector<VhostMemoryRegion> table = vhost_memory_table(mem_);
  for (Instance& in : instances_) TRY(setup_instance(in, acked, table));
  // The relay runs before the backends attach, so no call is written before someone reads it
  // (an eventfd keeps its count anyway: this only avoids a late first interrupt).
  TRY(start_relay());
  watch();
  return attach_backends();
}

// The order vhost needs, per instance:
// - VHOST_SET_OWNER first: the memory and vring ioctls and SET_BACKEND fail with EPERM before
//   it (vhost_dev_check_owner); it binds the vhost worker thread to this process's mm, which is
//   why userspace_addr / *_user_addr below are tern's own host-virtual addresses.
// - VHOST_SET_FEATURES before the backend: SET_BACKEND reads the used ring in the byte order
//   and the header length (sock_hlen 12 with VERSION_1 or MRG_RXBUF) that the features decide.
// - VHOST_SET_MEM_TABLE before VHOST_SET_VRING_ADDR and the backend: vhost translates every
//   descriptor's guest-physical address through this table (translate_desc); the ring
//   addresses themselves are host-virtual and are checked (vq_access_ok) when the backend
//   attaches.
// - VHOST_SET_VRING_NUM and VHOST_SET_VRING_BASE only while the vring has no backend (EBUSY
//   otherwise); BASE is the next available index (a restore starts mid-stream). The used index
//   is not set: attaching the backend reads it from the used ring (vhost_vq_init_access).
// - VHOST_SET_VRING_KICK / _CALL take their own reference to the eventfds.
// - VHOST_NET_SET_BACKEND (the tap) last, in attach_backends(): it starts the vring.
Result<void> VhostNetQueues::setup_instance(Instance& in, uint64_t acked,
                                            const std::vector<VhostMemoryRegion>& table) {
  ASSIGN_OR_RETURN(VhostNetFd fd, VhostNetFd::open(name_, in.pair));
  in.fd.emplace(std::move(fd));
  VhostNetFd& v = *in.fd;
  TRY(v.set_owner());
  ASSIGN_OR_RETURN(uint64_t offered, v.get_features());
  auto features = vhost_net_features_to_set(acked, offered);
  if (!features) return fail(name_, features.error().message());
  TRY(v.set_features(*features));
  TRY(v.set_mem_table(table));
  for (Vring& r : in.vrings) {
    TRY(v.set_vring_num(r.index, r.config.size));
    TRY(v.set_vring_addr(r.index, r.addr));
    TRY(v.set_vring_base(r.index, r.config.position.next_avail));
    TRY(v.set_vring_kick(r.index, r.kick.borrow()));
    // Our own eventfds, read by VhostCallRelay; watch() then gives vhost the MSI-X vector's
    // irqfd instead while that vector is deliverable (see the header).
    auto call = make_eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (!call) return fail_code(call.error().errnum, name_, "vhost-net: call eventfd");
    auto err = make_eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (!err) return fail_code(err.error().errnum, name_, "vhost-net: error eventfd");
    r.call = std::move(*call);
    r.err = std::move(*err);
    TRY(v.set_vring_call(r.index, r.call.borrow()));
    // Before the backend: a ring vhost stops at its first chain is still reported.
    TRY(v.set_vring_err(r.index, r.err.borrow()));
  }
  return {};
}

Result<void> VhostNetQueues::start_relay() {
  std::vector<VhostCallRelay::Call> calls;
  VhostCallRelay::Options options;
  options.mem = &mem_;
  options.on_error = [this](uint16_t queue) { vring_error(queue); };
  for (const Instance& in : instances_) {
    for (const Vring& r : in.vrings) {
      virtio::QueueCounters* counters =
          r.queue < observer_.queue_counters.size() ? observer_.queue_counters[r.queue] : nullptr;
      calls.push_back({r.queue, r.call.borrow(), counters, r.config.used_gpa});
      options.errors.push_back({r.queue, r.err.borrow()});
    }
  }
  ASSIGN_OR_RETURN(relay_,
                   VhostCallRelay::start(std::move(calls), interrupt_, name_, std::move(options)));
  return {};
}

// QEMU's "guest notifier mask" (virtio_pci_vector_mask/unmask, vhost_virtqueue_mask): vhost
// signals the vector's KVM irqfd directly while the vector is deliverable, tern's relayed call
// eventfd otherwise. A transport that cannot watch its vectors (INTx, no vector): relayed.
void VhostNetQueues::watch() {
  for (Instance& in : instances_)
    for (Vring& r : in.vrings)
      r.watch = interrupt_->watch_queue_irqfd(
          r.queue, [this, &fd = *in.fd, &r](BorrowedFd irqfd) { switch_call(fd, r, irqfd); });
}

void VhostNetQueues::unwatch() {
  for (Instance& in : instances_)
    for (Vring& r : in.vrings) {
      interrupt_->unwatch_queue_irqfd(r.watch);
      r.watch = 0;
    }
}

// Runs on the thread that changed the vector (a vCPU, or start()), under the MSI-X table's lock:
// it must not call into the interrupt (signal_used_queue would take that lock again).
// Ordering rules (KVM irqfd, drivers/vhost/vhost.c):
// - VHOST_SET_VRING_CALL takes the vring's mutex, which vhost's worker holds while it signals
//   (vhost_signal from handle_tx/handle_rx): once the ioctl returns, every later call goes to
//   the new fd. A call written to the irqfd just before a mask was sent while vhost still had
//   it: an interrupt raised before the mask, as from any device.
// - Mask (irqfd = -1): the relay fd from now on; the relay thread's signal_used_queue() finds
//   the vector masked (or MSI-X disabled) and sets its Pending bit (or uses INTx).
// - Unmask: the table has installed the vector's MSI route and sent its Pending bit before
//   calling here. Switch FIRST, then drain the relay fd: a call vhost wrote there before the
//   switch is either still in the fd (read here and written to the now deliverable irqfd), or
//   was taken by the relay thread, whose signal_used_queue() waits for the table's lock we hold
//   and then fires the unmasked vector (or had fired it before: the Pending bit just sent).
//   Draining before the switch would lose a call written between the two.
void VhostNetQueues::switch_call(VhostNetFd& fd, Vring& r, BorrowedFd irqfd) {
  const bool direct = irqfd.get() >= 0;
  if (direct == r.direct) return;
  if (auto s = fd.set_vring_call(r.index, direct ? irqfd : r.call.borrow()); !s) {
    // Not direct: vhost keeps the relay fd (still correct). Not masked: vhost keeps the irqfd.
    TERN_LOG_RATELIMITED(log_limit_, error, "{}: queue {}: {}", name_, r.queue,
                         s.error().message());
    return;
  }
  r.direct = direct;
  if (!direct) return;
  uint64_t count = 0;
  if (::read(r.call.get(), &count, sizeof count) != sizeof count || count == 0) return;
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(irqfd.get(), &one, sizeof one);  // EAGAIN: one pending
  virtio::QueueCounters* c =
      r.queue < observer_.queue_counters.size() ? observer_.queue_counters[r.queue] : nullptr;
  if (c) virtio::QueueCounters::add(c->interrupts);
}

// vhost-net found a chain it cannot use (e.g. a device-writable buffer in a TX chain: "Unexpected
// descriptor format for TX", drivers/vhost/net.c get_tx_bufs) and signals only the error
// eventfd (vq_err): the chain was taken from the available ring and is never put in the used
// ring, so the driver's queue stalls on it. Like the userspace path's broken ring (§2.1.2), the
// device needs a reset: the driver's reset tears these vrings down.
void VhostNetQueues::vring_error(uint16_t queue) {
  if (!error_logged_.exchange(true))
    spdlog::warn(
        "{}: vhost-net refused a malformed chain on queue {}: DEVICE_NEEDS_RESET set "
        "(counted in vhost_vring_errors; further errors are logged at debug)",
        name_, queue);
  else
    TERN_LOG_RATELIMITED(log_limit_, debug,
                         "{}: vhost-net refused a chain on queue {} (vring error)", name_, queue);
  interrupt_->set_needs_reset();
  if (observer_.on_vring_error) observer_.on_vring_error(queue);
}

// vhost never reads the kick eventfd's count: it acts on the wake-up of a write. A kick that
// came while the vring had no backend (paused, or before a restore) ran handle_tx/rx with no
// socket and was dropped, so each vring is kicked once after its backend attaches (a spurious
// kick only makes vhost look at an available ring with nothing new).
Result<void> VhostNetQueues::attach_backends() {
  for (Instance& in : instances_) {
    for (Vring& r : in.vrings) {
      TRY(in.fd->set_backend(r.index, in.tap));
      r.backend = true;
      uint64_t one = 1;
      if (::write(r.kick.get(), &one, sizeof one) != sizeof one)
        return fail_errno(name_, fmt::format("vhost-net: kick queue {}", r.queue));
    }
  }
  return {};
}

// VHOST_NET_SET_BACKEND -1 detaches the tap and returns after vhost_dev_flush(): the worker has
// finished with the vring (used entries and call signals written, RX packets it had batched put
// back in the tap's ring), and runs nothing for it until a backend attaches again. Only then is
// VHOST_GET_VRING_BASE (last_avail_idx, which the kernel keeps: the vring is not reset) stable.
void VhostNetQueues::remove_backends() {
  for (Instance& in : instances_) {
    for (Vring& r : in.vrings) {
      if (!r.backend) continue;
      if (auto s = in.fd->set_backend(r.index, BorrowedFd(-1)); !s)
        spdlog::error("{}", s.error().message());  // closing the fd still stops the vring
      r.backend = false;
    }
  }
}

std::vector<std::pair<uint16_t, QueuePosition>> VhostNetQueues::pause() {
  if (paused_) return paused_at_;
  remove_backends();
  // Every call vhost wrote before its backend went is relayed before pause() returns.
  relay_.reset();
  paused_at_.clear();
  for (Instance& in : instances_) {
    for (const Vring& r : in.vrings) {
      QueuePosition pos = r.config.position;
      if (auto base = in.fd->get_vring_base(r.index))
        pos.next_avail = *base;
      else
        spdlog::error("{}", base.error().message());
      // vhost keeps last_used_idx to itself; with the worker flushed it equals used->idx.
      if (auto used = mem_.read_obj<uint16_t>(r.config.used_gpa + virtio::used_idx_offset()))
        pos.next_used = *used;
      paused_at_.push_back({r.queue, pos});
    }
  }
  paused_ = true;
  return paused_at_;
}

// After pause() the vrings keep their memory table, addresses, kick/call fds and
// last_avail_idx: attaching the tap again restarts them (and re-reads used->idx), so no
// VHOST_SET_VRING_BASE is needed. A kick the guest sent meanwhile is replayed by
// attach_backends().
Result<void> VhostNetQueues::resume() {
  if (!paused_) return {};
  TRY(start_relay());
  if (auto r = attach_backends(); !r) {
    // Still paused: the vrings attached before the failure stop again (else they would run
    // while a later pause() returned the old positions at once).
    remove_backends();
    relay_.reset();
    return r;
  }
  paused_ = false;
  return {};
}

}  // namespace

Result<void> vhost_net_available() {
  ASSIGN_OR_RETURN(VhostNetFd fd, VhostNetFd::open("vhost-net", 0));
  (void)fd;
  return {};
}

uint64_t vhost_net_ring_features() {
  auto fd = VhostNetFd::open("vhost-net", 0);
  if (!fd) return 0;
  // VHOST_GET_FEATURES needs no owner.
  auto f = fd->get_features();
  return f ? (*f & vhost_net_ring_feature_mask()) : 0;
}

Result<std::unique_ptr<virtio::ExternalQueues>> start_vhost_net(
    const GuestMemory& mem, uint64_t acked, std::vector<virtio::ExternalQueue> queues,
    std::vector<BorrowedFd> taps, std::shared_ptr<VirtioInterrupt> interrupt, std::string name,
    VhostNetObserver observer) {
  auto q = std::make_unique<VhostNetQueues>(mem, std::move(interrupt), std::move(name),
                                            std::move(observer));
  // On error the partly started object's destructor detaches what was attached.
  TRY(q->start(acked, std::move(queues), std::move(taps)));
  return std::unique_ptr<virtio::ExternalQueues>(std::move(q));
}

}  // namespace tern::net
