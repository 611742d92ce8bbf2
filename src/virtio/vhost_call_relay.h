// VhostCallRelay: for vrings whose used-buffer notification has no KVM irqfd (INTx, no MSI-X
// vector), the back-end (kernel vhost-net, or a vhost-user process) signals a plain eventfd
// (VHOST_SET_VRING_CALL / VHOST_USER_SET_VRING_CALL) and one tern thread relays it: an epoll over
// those eventfds and a stop eventfd; a readable call fd is read (clearing its count) and becomes
// VirtioInterrupt::signal_used_queue(queue). The back-end has already applied EVENT_IDX /
// VRING_AVAIL_F_NO_INTERRUPT suppression before writing the fd, so every count is one interrupt.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/fd.h"
#include "base/result.h"
#include "virtio/virtio_device.h"

namespace tern::virtio {

/// See the file comment. The call fds are borrowed: they must outlive the relay.
class VhostCallRelay {
 public:
  /// One relayed vring: its call eventfd (non-blocking) and the device's queue index.
  struct Call {
    uint16_t queue = 0;
    BorrowedFd fd{-1};
  };

  /// Starts the thread. Errors (epoll_create1, epoll_ctl, eventfd) name `name`.
  [[nodiscard]] static Result<std::unique_ptr<VhostCallRelay>> start(
      std::vector<Call> calls, std::shared_ptr<VirtioInterrupt> interrupt, std::string name);
  /// Stops and joins the thread, then relays whatever count is left in each call fd, so every
  /// notification vhost sent before the destructor began has reached the interrupt on return.
  ~VhostCallRelay();
  VhostCallRelay(const VhostCallRelay&) = delete;
  VhostCallRelay& operator=(const VhostCallRelay&) = delete;

  /// Notifications relayed so far (all queues).
  [[nodiscard]] uint64_t relayed() const { return relayed_.load(std::memory_order_relaxed); }

 private:
  VhostCallRelay(std::vector<Call> calls, std::shared_ptr<VirtioInterrupt> interrupt,
                 std::string name, UniqueFd epoll, UniqueFd stop);
  void run();
  void relay(const Call& c);  // reads c.fd; signals if it had a count

  const std::vector<Call> calls_;
  const std::shared_ptr<VirtioInterrupt> interrupt_;
  const std::string name_;
  UniqueFd epoll_;
  UniqueFd stop_;
  std::atomic<uint64_t> relayed_{0};
  std::thread thread_;
};

}  // namespace tern::virtio
