// VhostCallRelay: for vrings whose used-buffer notification has no KVM irqfd (INTx, no MSI-X
// vector), the back-end (kernel vhost-net, or a vhost-user process) signals a plain eventfd
// (VHOST_SET_VRING_CALL / VHOST_USER_SET_VRING_CALL) and one tern thread relays it: an epoll over
// those eventfds and a stop eventfd; a readable call fd is read (clearing its count) and becomes
// VirtioInterrupt::signal_used_queue(queue). The back-end has already applied EVENT_IDX /
// VRING_AVAIL_F_NO_INTERRUPT suppression before writing the fd, so every count is one interrupt.
// Going through signal_used_queue() is what makes MSI-X masking hold for a back-end (a masked
// vector's interrupt becomes its Pending bit, sent at unmask: PCI 3.0 §6.8.2) and what counts
// it (interrupts_sent, and the queue's QueueCounters when given).
//
// It also watches the vrings' error eventfds (VHOST_SET_VRING_ERR): vhost-net signals only
// there when it refuses a malformed chain (vq_err in drivers/vhost/vhost.c); each
// readable error fd becomes one Options::on_error(queue) call.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/fd.h"
#include "base/result.h"
#include "memory/guest_memory.h"
#include "virtio/queue_counters.h"
#include "virtio/virtio_device.h"

namespace tern::virtio {

/// See the file comment. The call fds are borrowed: they must outlive the relay.
class VhostCallRelay {
 public:
  /// One relayed vring: its call eventfd (non-blocking) and the device's queue index.
  struct Call {
    uint16_t queue = 0;
    BorrowedFd fd{-1};
    /// When set: `interrupts` + 1 per relayed notification, and `requests` + the entries the
    /// back-end added to the used ring (its idx at `used_gpa` + used_idx_offset(), read at start,
    /// at each notification and at the destructor; Options::mem must be set).
    QueueCounters* counters = nullptr;
    uint64_t used_gpa = 0;
  };
  /// A vring's error eventfd (non-blocking), borrowed like the call fds.
  struct ErrorFd {
    uint16_t queue = 0;
    BorrowedFd fd{-1};
  };
  /// What the relay does besides signalling.
  struct Options {
    std::vector<ErrorFd> errors;  ///< Watched; each readable one calls on_error(queue).
    std::function<void(uint16_t queue)> on_error;  ///< Relay thread (or the destructor's).
    const GuestMemory* mem = nullptr;              ///< For Call::counters' used-ring reads.
  };

  /// Starts the thread. Errors (epoll_create1, epoll_ctl, eventfd) name `name`.
  [[nodiscard]] static Result<std::unique_ptr<VhostCallRelay>> start(
      std::vector<Call> calls, std::shared_ptr<VirtioInterrupt> interrupt, std::string name,
      Options options);
  /// start() without error fds or counters.
  [[nodiscard]] static Result<std::unique_ptr<VhostCallRelay>> start(
      std::vector<Call> calls, std::shared_ptr<VirtioInterrupt> interrupt, std::string name) {
    return start(std::move(calls), std::move(interrupt), std::move(name), Options());
  }
  /// Stops and joins the thread, then relays whatever count is left in each call (and error)
  /// fd, so every notification vhost sent before the destructor began has reached the interrupt
  /// on return (and the used-ring progress the counters).
  ~VhostCallRelay();
  VhostCallRelay(const VhostCallRelay&) = delete;
  VhostCallRelay& operator=(const VhostCallRelay&) = delete;

  /// Adds every tracked used ring's progress to its counters now (any thread): for a back-end
  /// whose calls bypass the relay (a direct irqfd), `requests` is still true when read.
  void account_used_now();

  /// Notifications relayed so far (all queues).
  [[nodiscard]] uint64_t relayed() const { return relayed_.load(std::memory_order_relaxed); }

 private:
  VhostCallRelay(std::vector<Call> calls, std::shared_ptr<VirtioInterrupt> interrupt,
                 std::string name, Options options, UniqueFd epoll, UniqueFd stop);
  void run();
  void relay(size_t i);          // reads calls_[i].fd; signals if it had a count
  void account_used(size_t i);   // adds calls_[i]'s used-ring progress to its counters (used_mu_)
  void error(const ErrorFd& e);  // reads e.fd; on_error if it had a count

  const std::vector<Call> calls_;
  const Options options_;
  std::mutex used_mu_;               // account_used(): relay thread, account_used_now(), dtor
  std::vector<uint16_t> used_seen_;  // per call: the used idx last accounted
  const std::shared_ptr<VirtioInterrupt> interrupt_;
  const std::string name_;
  UniqueFd epoll_;
  UniqueFd stop_;
  std::atomic<uint64_t> relayed_{0};
  std::thread thread_;
};

}  // namespace tern::virtio
