// BackendSession: activation, pause/resume, and the monitor's reconnect. The order of requests
// follows QEMU's vhost-user-blk (hw/block/vhost-user-blk.c vhost_user_blk_start and
// hw/virtio/vhost.c vhost_dev_start / vhost_virtqueue_start / vhost_virtqueue_stop).
#include "vhost_user/frontend/backend_session.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <system_error>

namespace tern::vhost_user {

namespace {

// Forwards to the device's interrupt, counting the notifications the relay delivers.
class CountingInterrupt final : public VirtioInterrupt {
 public:
  CountingInterrupt(std::shared_ptr<VirtioInterrupt> inner,
                    std::shared_ptr<std::atomic<uint64_t>> count)
      : inner_(std::move(inner)), count_(std::move(count)) {}
  void signal_used_queue(uint16_t queue) override {
    count_->fetch_add(1, std::memory_order_relaxed);
    inner_->signal_used_queue(queue);
  }
  void signal_config_change() override { inner_->signal_config_change(); }
  void set_needs_reset() override { inner_->set_needs_reset(); }
  [[nodiscard]] BorrowedFd queue_irqfd(uint16_t queue) const override {
    return inner_->queue_irqfd(queue);
  }

 private:
  const std::shared_ptr<VirtioInterrupt> inner_;
  const std::shared_ptr<std::atomic<uint64_t>> count_;
};

constexpr uint64_t kProtocolFeaturesBit = uint64_t{1} << VHOST_USER_F_PROTOCOL_FEATURES;

}  // namespace

Result<std::unique_ptr<BackendSession>> BackendSession::start(FrontendClient client,
                                                              Negotiated negotiated,
                                                              std::string name, uint16_t queues,
                                                              uint16_t queue_size,
                                                              SessionOptions options) {
  auto wake = make_eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (!wake) return fail_code(wake.error().errnum, name, "vhost-user monitor: eventfd");
  std::unique_ptr<BackendSession> s(new BackendSession(std::move(client), negotiated,
                                                       std::move(name), queues, queue_size, options,
                                                       std::move(*wake)));
  try {
    s->monitor_ = std::thread([p = s.get()] { p->monitor(); });
  } catch (const std::system_error& e) {
    return fail_code(e.code().value(), s->name_, "vhost-user monitor: thread");
  }
  return s;
}

BackendSession::BackendSession(FrontendClient client, Negotiated n, std::string name,
                               uint16_t queues, uint16_t queue_size, SessionOptions options,
                               UniqueFd wake)
    : name_(std::move(name)),
      path_(client.socket_path()),
      queues_(queues),
      queue_size_(queue_size),
      options_(options),
      wake_(std::move(wake)),
      client_(std::move(client)),
      negotiated_(n) {
  connected_ = true;
}

BackendSession::~BackendSession() {
  deactivate();
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake();
  if (monitor_.joinable()) monitor_.join();
}

void BackendSession::drop_locked(const std::string& why, bool protocol_error) {
  if (!client_) return;
  client_.reset();  // closes the socket: the back-end stops the vrings (spec "disconnect")
  connected_ = false;
  ++generation_;
  retry_logged_ = false;
  disconnects_.fetch_add(1, std::memory_order_relaxed);
  if (protocol_error) protocol_errors_.fetch_add(1, std::memory_order_relaxed);
  if (active_)
    for (Vring& v : active_->vrings) v.started = false;
  TERN_LOG_RATELIMITED(
      log_limit_, warn, "{}: vhost-user back-end {} lost: {}; {}", name_, path_, why,
      active_ ? "reconnecting while the device is active" : "reconnecting at the next activation");
  wake();
}

Result<void> BackendSession::connect_locked() {
  reconnect_attempts_.fetch_add(1, std::memory_order_relaxed);
  ASSIGN_OR_RETURN(FrontendClient c, FrontendClient::connect(path_, options_.reply_timeout));
  auto n = negotiate(c, queues_);
  if (!n) {
    protocol_errors_.fetch_add(1, std::memory_order_relaxed);
    return tl::unexpected(n.error());
  }
  client_.emplace(std::move(c));
  negotiated_ = *n;
  sent_regions_.clear();
  ++generation_;
  connected_ = true;
  wake();  // the monitor watches the new socket
  return {};
}

Result<void> BackendSession::activate(const GuestMemory& mem, uint64_t acked,
                                      std::vector<virtio::ExternalQueue> queues,
                                      std::shared_ptr<VirtioInterrupt> interrupt) {
  std::lock_guard lock(mu_);
  TERN_CHECK(!active_);  // the device base stops the previous activation first
  // Everything that needs no back-end is checked before the first request.
  Activation a;
  a.mem = &mem;
  a.acked = acked;
  a.interrupt = std::move(interrupt);
  ASSIGN_OR_RETURN(a.table, memory_table(mem));
  for (virtio::ExternalQueue& q : queues) {
    if (!q.kick.valid()) return fail(name_, fmt::format("queue {}: no kick eventfd", q.index));
    ASSIGN_OR_RETURN(VhostVringAddr addr, vring_user_addresses(mem, q.index, q.config));
    Vring v;
    v.queue = q.index;
    v.config = q.config;
    v.addr = addr;
    v.kick = std::move(q.kick);
    a.vrings.push_back(std::move(v));
  }
  if (a.vrings.empty()) return fail(name_, "vhost-user: no queue to serve");
  if (!client_) {
    if (auto r = connect_locked(); !r)
      return fail(name_,
                  fmt::format("vhost-user back-end {} is away: {}", path_, r.error().message()));
  }
  active_.emplace(std::move(a));
  if (auto r = replay_locked(/*first=*/true); !r) {
    active_->relay.reset();
    active_.reset();
    drop_locked(r.error().message(), true);
    return r;
  }
  return {};
}

// SET_FEATURES, the memory table and the inflight region, then the vrings (unless paused: then
// resume() starts them). Used by the first activation and by every reconnect.
Result<void> BackendSession::replay_locked(bool first) {
  Activation& a = *active_;
  FrontendClient& c = *client_;
  if (uint64_t missing = a.acked & ~negotiated_.features; missing != 0) {
    std::string why = fmt::format(
        "vhost-user back-end {} no longer offers features {:#x} the driver acked", path_, missing);
    if (!first) {
      a.failed = true;
      needs_reset_.fetch_add(1, std::memory_order_relaxed);
      spdlog::warn("{}: {}; device needs reset", name_, why);
      a.interrupt->set_needs_reset();
    }
    return fail(name_, why);
  }
  TRY(c.set_features(features_to_set(a.acked, negotiated_)));
  TRY(memory_table_locked(a.table));
  if (c.has_protocol_feature(VHOST_USER_PROTOCOL_F_INFLIGHT_SHMFD)) {
    // Kept across reconnects (QEMU keeps s->inflight): the new back-end finds in it the
    // requests the old one had taken but not completed, and resubmits them.
    if (!a.inflight_fd.valid()) {
      ASSIGN_OR_RETURN(InflightReply r, c.get_inflight_fd(queues_, queue_size_));
      a.inflight_info = r.info;
      a.inflight_info->num_queues = queues_;
      a.inflight_info->queue_size = queue_size_;
      a.inflight_fd = std::move(r.fd);
    }
    TRY(c.set_inflight_fd(*a.inflight_info, a.inflight_fd.get()));
  } else if (a.inflight_fd.valid()) {
    TERN_LOG_RATELIMITED(log_limit_, warn,
                         "{}: vhost-user back-end {} no longer offers INFLIGHT_SHMFD: requests "
                         "in flight when it went away are not resubmitted",
                         name_, path_);
  }
  if (a.paused) {
    // resume() starts the vrings; the old back-end's next_avail means nothing to this one.
    for (auto& [queue, pos] : a.paused_at) pos.next_avail = pos.next_used;
    return {};
  }
  return start_vrings_locked(first ? Base::kConfig : Base::kUsed);
}

Result<void> BackendSession::memory_table_locked(const MemTableMsg& table) {
  if (!client_->has_protocol_feature(VHOST_USER_PROTOCOL_F_CONFIGURE_MEM_SLOTS))
    return send_memory_table(*client_, table);  // SET_MEM_TABLE replaces the table
  auto same = [&] {
    if (sent_regions_.size() != table.regions.size()) return false;
    for (size_t i = 0; i < table.regions.size(); ++i)
      if (std::memcmp(&sent_regions_[i], &table.regions[i], sizeof(VhostUserMemoryRegion)) != 0)
        return false;
    return true;
  };
  if (same()) return {};
  if (!sent_regions_.empty()) {
    // Another layout on a connection that has regions (a restore's new RAM): a fresh
    // connection starts with none (REM_MEM_REG is not needed anywhere else).
    drop_locked("guest RAM layout changed", false);
    TRY(connect_locked());
    TRY(client_->set_features(features_to_set(active_->acked, negotiated_)));
  }
  TRY(send_memory_table(*client_, table));
  sent_regions_ = table.regions;
  return {};
}

Result<BorrowedFd> BackendSession::call_fd_locked(Vring& v) {
  // The MSI-X vector's irqfd: the back-end then injects the interrupt itself (no tern thread on
  // the data path). Without one (INTx, no vector): our eventfd, relayed by VhostCallRelay.
  BorrowedFd irqfd = active_->interrupt->queue_irqfd(v.queue);
  if (irqfd.get() >= 0) return irqfd;
  if (!v.relayed_call.valid()) {
    auto call = make_eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (!call) return fail_code(call.error().errnum, name_, "vhost-user: call eventfd");
    v.relayed_call = std::move(*call);
    relay_dirty_ = true;
  }
  return v.relayed_call.borrow();
}

Result<void> BackendSession::restart_relay_locked() {
  Activation& a = *active_;
  a.relay.reset();  // relays what is left in the call fds
  relay_dirty_ = false;
  std::vector<virtio::VhostCallRelay::Call> calls;
  for (const Vring& v : a.vrings)
    if (v.relayed_call.valid()) calls.push_back({v.queue, v.relayed_call.borrow()});
  if (calls.empty()) return {};
  auto counting = std::make_shared<CountingInterrupt>(a.interrupt, relayed_);
  ASSIGN_OR_RETURN(a.relay, virtio::VhostCallRelay::start(std::move(calls), counting, name_));
  return {};
}

Result<void> BackendSession::start_vrings_locked(Base base) {
  Activation& a = *active_;
  const bool enable = (negotiated_.features & kProtocolFeaturesBit) != 0;
  for (Vring& v : a.vrings) {
    uint16_t next = v.config.position.next_avail;
    if (base == Base::kUsed) {
      // After a reconnect: the used ring's idx is what the guest has been given back; the
      // back-end resubmits what lies between it and avail from the inflight region (reading
      // from its own last avail index instead would lose them: Cloud Hypervisor PR #8592).
      ASSIGN_OR_RETURN(next, read_used_idx(*a.mem, v.config));
      auto avail = read_avail_idx(*a.mem, v.config);
      const uint16_t outstanding = avail ? static_cast<uint16_t>(*avail - next) : 0;
      if (outstanding != 0 && !client_->has_protocol_feature(VHOST_USER_PROTOCOL_F_INFLIGHT_SHMFD))
        // Without the inflight region the new back-end reads them again from the available
        // ring: exact when its predecessor completed in order; one that completed a later
        // request before an earlier one serves the later again and never the earlier.
        TERN_LOG_RATELIMITED(log_limit_, warn,
                             "{}: queue {}: {} request(s) past the used ring's idx {} are served "
                             "from the available ring (the back-end offers no INFLIGHT_SHMFD: "
                             "exact only if the one that went away completed in order)",
                             name_, v.queue, outstanding, next);
    } else if (base == Base::kPaused) {
      for (const auto& [queue, pos] : a.paused_at)
        if (queue == v.queue) next = pos.next_avail;
    }
    ASSIGN_OR_RETURN(BorrowedFd call, call_fd_locked(v));
    VringStart s;
    s.index = v.queue;
    s.size = v.config.size;
    s.base = next;
    s.addr = v.addr;
    s.kick = v.kick.get();
    s.call = call.get();
    TRY(start_vring(*client_, s, enable));
    v.started = true;
  }
  if (relay_dirty_ ||
      (!a.relay && std::any_of(a.vrings.begin(), a.vrings.end(),
                               [](const Vring& v) { return v.relayed_call.valid(); })))
    TRY(restart_relay_locked());
  // A kick the guest wrote while no back-end watched the eventfd may have been consumed by the
  // old back-end or never read: one kick per queue makes the back-end look at the avail ring.
  for (Vring& v : a.vrings) {
    uint64_t one = 1;
    if (::write(v.kick.get(), &one, sizeof one) != sizeof one)
      return fail_errno(name_, fmt::format("vhost-user: kick queue {}", v.queue));
  }
  return {};
}

void BackendSession::stop_vrings_locked(bool record) {
  Activation& a = *active_;
  if (record) a.paused_at.clear();
  const uint64_t generation = generation_;
  for (Vring& v : a.vrings) {
    std::optional<uint32_t> answer;
    if (v.started && client_) {
      // GET_VRING_BASE stops the vring and answers its next available index.
      auto b = client_->get_vring_base(v.queue);
      if (b)
        answer = *b;
      else
        drop_locked(b.error().message(), true);  // the other vrings stop with the socket
    }
    v.started = false;
    if (!record) continue;  // a device reset: the answer is neither used nor judged
    // Read after the answer: a completion the back-end published before answering is counted.
    auto used = read_used_idx(*a.mem, v.config);
    uint16_t used_idx = used ? *used : v.config.position.next_used;
    std::optional<uint16_t> next_avail;
    if (answer) {
      // Trusted only inside the ring's window: a buggy or hostile back-end's index would
      // otherwise become the position the ring resumes from (or a snapshot saves).
      auto avail = read_avail_idx(*a.mem, v.config);
      auto checked =
          check_vring_base(*answer, v.queue, v.config.size, used_idx, avail ? *avail : used_idx);
      if (checked)
        next_avail = *checked;
      else
        drop_locked(checked.error().message(), true);
    }
    // The back-end away (or GET_VRING_BASE failed or refused): like QEMU's vhost_virtqueue_stop,
    // both positions are the used ring's idx: what was taken but not completed is resubmitted by
    // the back-end from the inflight region when it comes back (or read again from the avail ring).
    a.paused_at.push_back({v.queue, QueuePosition{next_avail.value_or(used_idx), used_idx}});
  }
  // Dropped on the way (a failed or refused answer): the vrings stopped before on that
  // connection also start from the used ring's idx, as replay_locked() would set them.
  if (record && generation_ != generation)
    for (auto& [queue, pos] : a.paused_at) pos.next_avail = pos.next_used;
}

void BackendSession::deactivate() {
  std::lock_guard lock(mu_);
  if (!active_) return;
  stop_vrings_locked(false);
  active_->relay.reset();  // after the back-end stopped: every call it made is relayed
  active_.reset();
  relay_dirty_ = false;
}

std::vector<std::pair<uint16_t, QueuePosition>> BackendSession::pause() {
  std::lock_guard lock(mu_);
  if (!active_) return {};
  if (active_->paused) return active_->paused_at;
  stop_vrings_locked(true);
  active_->relay.reset();
  active_->paused = true;
  return active_->paused_at;
}

Result<void> BackendSession::resume() {
  std::lock_guard lock(mu_);
  if (!active_ || !active_->paused) return {};
  active_->paused = false;
  // The back-end away: the monitor's reconnect starts the vrings (from the used ring).
  if (!client_ || active_->failed) return restart_relay_locked();
  if (auto r = start_vrings_locked(Base::kPaused); !r) {
    drop_locked(r.error().message(), true);  // the monitor reconnects and replays
    return restart_relay_locked();
  }
  return {};
}

void BackendSession::counters(std::vector<std::pair<std::string, uint64_t>>& out) const {
  auto get = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  out.emplace_back("backend_connected", connected_.load(std::memory_order_relaxed) ? 1 : 0);
  out.emplace_back("backend_disconnects", get(disconnects_));
  out.emplace_back("backend_reconnects", get(reconnects_));
  out.emplace_back("backend_reconnect_attempts", get(reconnect_attempts_));
  out.emplace_back("backend_protocol_errors", get(protocol_errors_));
  out.emplace_back("backend_needs_reset", get(needs_reset_));
  out.emplace_back("relayed_calls", get(*relayed_));
}

}  // namespace tern::vhost_user
