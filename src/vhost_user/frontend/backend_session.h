// BackendSession: one vhost-user front-end's relationship with its back-end over the device's
// life: the current connection (a FrontendClient, or none while the back-end is away), the
// current activation (memory, acked features, the vrings with their kick and call fds, the
// inflight fd), and the monitor thread that notices the back-end going away and brings it back.
//
// Failure model (tern never dies of its back-end): a request that fails (timeout, garbage, a
// NACK) or a socket that hangs up drops the connection: counted (disconnects, protocol_errors),
// one rate-limited warning. While a device is active the monitor retries connect() with a
// backoff of options.reconnect_min doubling to options.reconnect_max (never a busy loop); a new
// connection is negotiated again and, when its features still include everything the driver
// acked, the activation is replayed: SET_FEATURES, the memory table, SET_INFLIGHT_FD (the fd
// kept from GET_INFLIGHT_FD, so the back-end resubmits what was in flight), each vring with
// base = the used ring's idx read from guest memory, and one kick per queue. A back-end that
// came back without the acked features makes the device NEEDS_RESET (logged, counted).
//
// Thread-safety: all public methods may be called from any thread; they and the monitor are
// serialized by one mutex, held across requests (each bounded by the reply timeout). The
// counters are relaxed atomics. Never called on a vCPU thread (activation runs on the control
// thread).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/fd.h"
#include "base/log.h"
#include "base/result.h"
#include "memory/guest_memory.h"
#include "vhost_user/frontend/frontend_setup.h"
#include "vhost_user/frontend_client.h"
#include "virtio/vhost_call_relay.h"
#include "virtio/virtio_device_base.h"

namespace tern::vhost_user {

/// Tunables (tests shorten them).
struct SessionOptions {
  std::chrono::milliseconds reply_timeout = kReplyTimeout;
  std::chrono::milliseconds reconnect_min{100};
  std::chrono::milliseconds reconnect_max{1000};
};

/// See the file comment.
class BackendSession {
 public:
  /// Adopts a connected, negotiated client (the device's create() did the handshake and
  /// GET_CONFIG) and starts the monitor. `queues` / `queue_size` are the front-end's (for
  /// GET_INFLIGHT_FD and the reconnect handshake). Errors (eventfd, thread) name `name`.
  [[nodiscard]] static Result<std::unique_ptr<BackendSession>> start(
      FrontendClient client, Negotiated negotiated, std::string name, uint16_t queues,
      uint16_t queue_size, SessionOptions options);
  /// Stops the monitor; deactivate() first if active.
  ~BackendSession();
  BackendSession(const BackendSession&) = delete;
  BackendSession& operator=(const BackendSession&) = delete;

  /// DRIVER_OK (control thread): validates every ring, then SET_FEATURES, the memory table,
  /// GET/SET_INFLIGHT_FD where negotiated, and per queue the vring start (start_vring). A back-end
  /// that is away gets one connect attempt first. Any failure fails the activation (the
  /// connection is dropped; the device base then sets NEEDS_RESET).
  [[nodiscard]] Result<void> activate(const GuestMemory& mem, uint64_t acked,
                                      std::vector<virtio::ExternalQueue> queues,
                                      std::shared_ptr<VirtioInterrupt> interrupt);
  /// Device reset: GET_VRING_BASE per started vring (stops it), then forgets the activation
  /// (kick/call fds closed, inflight fd dropped: a reset driver's rings are new). Idempotent.
  void deactivate();
  /// ExternalQueues::pause(): GET_VRING_BASE per started vring; positions {that, used->idx}.
  /// An answer outside the ring's window (check_vring_base) is a protocol error: the connection
  /// is dropped and both positions are used->idx, as when the back-end is away.
  std::vector<std::pair<uint16_t, QueuePosition>> pause();
  /// ExternalQueues::resume(): each vring started again from its paused position.
  [[nodiscard]] Result<void> resume();

  /// Appends backend_connected (0/1), backend_disconnects, backend_reconnects,
  /// backend_reconnect_attempts, backend_protocol_errors (failed requests: timeout, garbage,
  /// NACK), backend_needs_reset, relayed_calls (calls relayed for queues without an irqfd).
  /// Prefixed so they do not collide with the transport's "protocol_errors". Lock-free.
  void counters(std::vector<std::pair<std::string, uint64_t>>& out) const;
  [[nodiscard]] bool connected() const { return connected_.load(std::memory_order_relaxed); }

 private:
  struct Vring {
    uint16_t queue = 0;
    VirtqueueConfig config;
    VhostVringAddr addr;
    UniqueFd kick;
    UniqueFd relayed_call;  // our eventfd when the queue has no irqfd (relayed)
    bool started = false;   // set up on the current connection and not stopped since
  };
  struct Activation {
    const GuestMemory* mem = nullptr;
    uint64_t acked = 0;
    std::shared_ptr<VirtioInterrupt> interrupt;
    MemTableMsg table;
    std::vector<Vring> vrings;
    std::optional<VhostUserInflight> inflight_info;
    UniqueFd inflight_fd;
    std::unique_ptr<virtio::VhostCallRelay> relay;
    bool paused = false;
    bool failed = false;  // NEEDS_RESET set: the monitor stops replaying
    std::vector<std::pair<uint16_t, QueuePosition>> paused_at;
  };

  BackendSession(FrontendClient client, Negotiated n, std::string name, uint16_t queues,
                 uint16_t queue_size, SessionOptions options, UniqueFd wake);

  // All *_locked: mu_ held.
  void drop_locked(const std::string& why, bool protocol_error);
  Result<void> connect_locked();  // a new client, negotiated; nothing replayed
  Result<void> replay_locked(bool first);
  Result<void> memory_table_locked(
      const MemTableMsg& table);  // features, memory, inflight, vrings (unless paused)
  enum class Base { kConfig, kPaused, kUsed };  // where a vring's SET_VRING_BASE comes from
  Result<void> start_vrings_locked(Base base);
  void stop_vrings_locked(bool record);  // GET_VRING_BASE; record positions in paused_at
  Result<BorrowedFd> call_fd_locked(Vring& v);
  Result<void> restart_relay_locked();
  void wake();
  void wait_wake(int timeout_ms);
  void monitor();
  bool try_reconnect();

  const std::string name_;
  const std::string path_;
  const uint16_t queues_;
  const uint16_t queue_size_;
  const SessionOptions options_;
  UniqueFd wake_;  // eventfd: stop, or the connection changed

  std::mutex mu_;
  std::optional<FrontendClient> client_;
  Negotiated negotiated_;
  uint64_t generation_ = 0;  // bumped per connection
  // ADD_MEM_REG regions sent on this connection (CONFIGURE_MEM_SLOTS adds, it does not replace:
  // a second activation on the same connection sends them only if the layout changed).
  std::vector<VhostUserMemoryRegion> sent_regions_;
  bool relay_dirty_ = false;   // a vring got a relayed call fd the relay does not watch
  bool retry_logged_ = false;  // the first failed reconnect after a drop was logged
  std::optional<Activation> active_;
  bool stop_ = false;
  RateLimit log_limit_{3, std::chrono::seconds(60)};
  RateLimit reconnected_log_limit_{3, std::chrono::seconds(60)};  // "reconnected" (info)

  std::atomic<bool> connected_{false};
  std::atomic<uint64_t> disconnects_{0}, reconnects_{0}, reconnect_attempts_{0},
      protocol_errors_{0}, needs_reset_{0};
  std::shared_ptr<std::atomic<uint64_t>> relayed_ = std::make_shared<std::atomic<uint64_t>>(0);
  std::thread monitor_;
};

}  // namespace tern::vhost_user
