// FakeBackend: a scripted vhost-user back-end for the front-end's tests, on a thread, listening
// on a real Unix socket (Listener). It answers the requests a front-end sends (GET_* from its
// fields, REPLY_ACK 0 when asked), records every message it got with its fds, and can hang up,
// never answer, or answer garbage. Waiting is by condition variable with a deadline (a test
// fails instead of hanging); the thread blocks in poll() on the sockets and a stop eventfd.
#pragma once

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "vhost_user/vhost_user_channel.h"
#include "virtio/block/virtio_blk_spec.h"

namespace tern::vhost_user::testing {

/// One message the fake received, and on which connection (1, 2, ...).
struct Received {
  int connection = 0;
  Message msg;
  template <class T>
  [[nodiscard]] T body() const {
    T v{};
    std::memcpy(&v, msg.payload.data(), std::min(sizeof v, msg.payload.size()));
    return v;
  }
};

class FakeBackend {
 public:
  enum class Mode { kNormal, kHang, kGarbage };

  // Script (set before start(), or under lock() later).
  uint64_t features = 0;
  uint64_t protocol_features = 0;
  uint64_t queue_num = 1;
  uint64_t max_mem_slots = 32;
  uint32_t vring_base = 0;                    ///< GET_VRING_BASE answer
  std::optional<uint32_t> config_reply_size;  ///< GET_CONFIG: answer this many bytes instead
  virtio::VirtioBlkConfig config{};
  Mode mode = Mode::kNormal;
  uint32_t garbage_at = VHOST_USER_GET_FEATURES;  ///< kGarbage: the request answered wrongly

  explicit FakeBackend(std::string path) : path_(std::move(path)) {}
  ~FakeBackend() { stop(); }

  /// Listens and starts the thread.
  void start() {
    listener_.emplace(Listener::listen(path_).value());
    stop_fd_ = make_eventfd(0, EFD_NONBLOCK).value();
    thread_ = std::thread([this] { run(); });
  }
  void stop() {
    if (!thread_.joinable()) return;
    uint64_t one = 1;
    (void)!::write(stop_fd_.get(), &one, sizeof one);
    thread_.join();
    listener_.reset();  // unlinks the socket: connect() fails at once
  }
  /// Closes the current connection (the back-end "died"; the listener stays for a reconnect).
  void hang_up() {
    uint64_t two = 2;
    (void)!::write(stop_fd_.get(), &two, sizeof two);
  }

  /// Runs `f` on the script and log under the fake's lock.
  template <class F>
  auto locked(F f) {
    std::lock_guard l(mu_);
    return f(*this);
  }
  /// Waits until `pred(log)` holds (false after 20 s).
  bool wait(const std::function<bool(const std::vector<Received>&)>& pred) {
    std::unique_lock l(mu_);
    return cv_.wait_for(l, std::chrono::seconds(20), [&] { return pred(log_); });
  }
  /// Waits until `n` messages of `request` arrived on `connection` (0: any).
  bool wait_for(uint32_t request, size_t n = 1, int connection = 0) {
    return wait(
        [&](const std::vector<Received>& log) { return count(log, request, connection) >= n; });
  }
  static size_t count(const std::vector<Received>& log, uint32_t request, int connection = 0) {
    size_t n = 0;
    for (const Received& r : log)
      if (r.msg.hdr.request == request && (connection == 0 || r.connection == connection)) ++n;
    return n;
  }
  /// The log (call under locked()).
  std::vector<Received>& log() { return log_; }
  /// Request codes received on `connection`, in order.
  std::vector<uint32_t> requests(int connection) {
    std::lock_guard l(mu_);
    std::vector<uint32_t> out;
    for (const Received& r : log_)
      if (r.connection == connection) out.push_back(r.msg.hdr.request);
    return out;
  }
  /// The inflight memfd's inode this fake handed out (0 if none).
  ino_t inflight_inode() {
    std::lock_guard l(mu_);
    return inflight_inode_;
  }
  /// The same, under locked().
  [[nodiscard]] ino_t inflight_inode_locked() const { return inflight_inode_; }

 private:
  void run() {
    int connection = 0;
    for (;;) {
      pollfd p[2] = {{listener_->fd().get(), POLLIN, 0}, {stop_fd_.get(), POLLIN, 0}};
      if (::poll(p, 2, -1) < 0) continue;
      if ((p[1].revents & POLLIN) && take_stop() != 2) return;
      if (!(p[0].revents & POLLIN)) continue;
      auto ch = listener_->accept();
      if (!ch) return;
      ++connection;
      if (!serve(*ch, connection)) return;
    }
  }
  uint64_t take_stop() {
    uint64_t v = 0;
    (void)!::read(stop_fd_.get(), &v, sizeof v);
    return v;
  }
  // One connection; false when the fake is stopping.
  bool serve(Channel& ch, int connection) {
    for (;;) {
      pollfd p[2] = {{ch.fd().get(), POLLIN, 0}, {stop_fd_.get(), POLLIN, 0}};
      if (::poll(p, 2, -1) < 0) continue;
      if (p[1].revents & POLLIN) return take_stop() == 2;
      auto m = ch.recv(std::chrono::seconds(1));
      if (!m) return true;  // the front-end closed
      uint32_t req = m->hdr.request;
      bool need_reply = m->hdr.flags & VHOST_USER_NEED_REPLY_MASK;
      std::optional<Message> reply;
      UniqueFd reply_fd;
      {
        std::lock_guard l(mu_);
        if (mode == Mode::kGarbage && req == garbage_at) {
          // A reply to another request with a wrong size.
          reply = make_reply(VHOST_USER_GET_QUEUE_NUM, std::span<const uint8_t>(kJunk, 3));
        } else if (mode != Mode::kHang) {
          reply = answer(*m, reply_fd);
          if (!reply && need_reply) reply = u64_reply(req, 0);
        }
        log_.push_back(Received{connection, std::move(*m)});
      }
      cv_.notify_all();
      if (reply) {
        int fd = reply_fd.get();
        (void)ch.send(*reply,
                      reply_fd.valid() ? std::span<const int>(&fd, 1) : std::span<const int>{});
      }
    }
  }
  static Message u64_reply(uint32_t req, uint64_t v) {
    return make_reply(req,
                      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&v), sizeof v));
  }
  // mu_ held.
  std::optional<Message> answer(const Message& m, UniqueFd& fd) {
    const uint32_t req = m.hdr.request;
    switch (req) {
      case VHOST_USER_GET_FEATURES:
        return u64_reply(req, features);
      case VHOST_USER_GET_PROTOCOL_FEATURES:
        return u64_reply(req, protocol_features);
      case VHOST_USER_GET_QUEUE_NUM:
        return u64_reply(req, queue_num);
      case VHOST_USER_GET_MAX_MEM_SLOTS:
        return u64_reply(req, max_mem_slots);
      case VHOST_USER_GET_VRING_BASE: {
        VhostVringState s{};
        std::memcpy(&s, m.payload.data(), std::min(sizeof s, m.payload.size()));
        s.num = vring_base;
        return make_reply(req,
                          std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&s), sizeof s));
      }
      case VHOST_USER_GET_CONFIG: {
        VhostUserConfigHeader h{};
        std::memcpy(&h, m.payload.data(), std::min(sizeof h, m.payload.size()));
        uint32_t n = config_reply_size.value_or(h.size);
        std::vector<uint8_t> body(sizeof h + n, 0);
        h.size = n;
        std::memcpy(body.data(), &h, sizeof h);
        std::memcpy(body.data() + sizeof h, &config, std::min<size_t>(n, sizeof config));
        return make_reply(req, body);
      }
      case VHOST_USER_GET_INFLIGHT_FD: {
        VhostUserInflight in{};
        std::memcpy(&in, m.payload.data(), std::min(sizeof in, m.payload.size()));
        in.mmap_size = inflight_queue_region_bytes(in.queue_size) * in.num_queues;
        in.mmap_offset = 0;
        fd = UniqueFd(::memfd_create("fake-inflight", MFD_CLOEXEC));
        (void)!::ftruncate(fd.get(), static_cast<off_t>(in.mmap_size));
        struct stat st {};
        ::fstat(fd.get(), &st);
        inflight_inode_ = st.st_ino;
        return make_reply(
            req, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&in), sizeof in));
      }
      default:
        return std::nullopt;
    }
  }

  static constexpr uint8_t kJunk[3] = {0xde, 0xad, 0xbe};
  const std::string path_;
  std::optional<Listener> listener_;
  UniqueFd stop_fd_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Received> log_;
  ino_t inflight_inode_ = 0;
};

}  // namespace tern::vhost_user::testing
