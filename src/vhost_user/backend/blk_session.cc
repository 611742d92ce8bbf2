#include "vhost_user/backend/blk_session.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include <spdlog/spdlog.h>

#include "block/block_executor.h"
#include "block/io_engine.h"
#include "virtio/block/blk_config.h"
#include "virtio/block/block_queue_handler.h"
#include "virtio/virtio_spec.h"

namespace tern::vhost_user {

namespace {
constexpr uint64_t kProtocolFeaturesBit = uint64_t{1} << VHOST_USER_F_PROTOCOL_FEATURES;
constexpr uint16_t kMaxRingSize = 1024;
constexpr const char* kName = "vhost-user-blk";
// QEMU's default vhost-user-blk-pci queue-size, and the ring qemu-storage-daemon sizes seg_max for.
constexpr uint16_t kFrontendDefaultRing = 128;

template <class T>
Message reply_of(uint32_t request, const T& body) {
  return make_reply(request, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&body),
                                                      sizeof body));
}
}  // namespace

uint32_t backend_seg_max(uint16_t queue_size) {
  return static_cast<uint32_t>(std::min(queue_size, kFrontendDefaultRing)) - 2;
}

Result<BlkDisk> BlkDisk::open(const DiskConfig& config) {
  TRY(validate_disk_config(config));
  ASSIGN_OR_RETURN(DiskImage image, DiskImage::open(config));
  BlkDisk d{config, std::move(image)};
  d.engine = config.engine;
  if (d.engine == IoEngineKind::kIoUring && !io_uring_usable()) {
    spdlog::warn("{}: io_uring is not usable on this host; using the thread-pool I/O engine", kName);
    d.engine = IoEngineKind::kThreads;
  }
  d.config_space = virtio::make_blk_config(d.config, d.image);
  d.config_space.seg_max = backend_seg_max(config.queue_size);
  d.features = virtio::blk_device_features(d.config, d.image);
  return d;
}

/// Used-buffer notifications as writes to the ring's call eventfd; a broken ring writes the
/// error eventfd (SET_VRING_ERR) when there is one. The fds change under a mutex (SET_VRING_CALL
/// may come while the ring runs: QEMU masks and unmasks vectors that way).
class BlkSession::CallInterrupt final : public VirtioInterrupt {
 public:
  void set_call(UniqueFd fd) {
    std::lock_guard lock(mu_);
    call_ = std::move(fd);
  }
  void set_err(UniqueFd fd) {
    std::lock_guard lock(mu_);
    err_ = std::move(fd);
  }
  void signal_used_queue(uint16_t) override { signal(call_); }
  void signal_config_change() override {}  // needs BACKEND_REQ, not offered: the config is fixed
  void set_needs_reset() override { signal(err_); }

 private:
  void signal(const UniqueFd& fd) {
    std::lock_guard lock(mu_);
    if (!fd.valid()) return;
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(fd.get(), &one, sizeof one);
  }
  std::mutex mu_;
  UniqueFd call_, err_;  // mu_
};

BlkSession::BlkSession(const BlkDisk& disk, BackendStats& stats, RateLimit& log_limit)
    : disk_(disk), stats_(stats), log_limit_(log_limit), rings_(disk.config.queues) {
  for (auto& r : rings_) r.interrupt = std::make_shared<CallInterrupt>();
}

BlkSession::~BlkSession() {
  stop_all();
  memory_.clear();
}

bool BlkSession::implements(uint32_t request) {
  switch (request) {
    case VHOST_USER_GET_FEATURES: case VHOST_USER_SET_FEATURES: case VHOST_USER_SET_OWNER:
    case VHOST_USER_RESET_OWNER: case VHOST_USER_SET_MEM_TABLE: case VHOST_USER_SET_VRING_NUM:
    case VHOST_USER_SET_VRING_ADDR: case VHOST_USER_SET_VRING_BASE:
    case VHOST_USER_GET_VRING_BASE: case VHOST_USER_SET_VRING_KICK:
    case VHOST_USER_SET_VRING_CALL: case VHOST_USER_SET_VRING_ERR:
    case VHOST_USER_GET_PROTOCOL_FEATURES: case VHOST_USER_SET_PROTOCOL_FEATURES:
    case VHOST_USER_GET_QUEUE_NUM: case VHOST_USER_SET_VRING_ENABLE: case VHOST_USER_GET_CONFIG:
    case VHOST_USER_SET_CONFIG: case VHOST_USER_GET_INFLIGHT_FD: case VHOST_USER_SET_INFLIGHT_FD:
    case VHOST_USER_GET_MAX_MEM_SLOTS: case VHOST_USER_ADD_MEM_REG: case VHOST_USER_REM_MEM_REG:
      return true;
    default: return false;
  }
}

std::optional<BlkSession::Reply> BlkSession::unsupported(uint32_t request, bool need_reply) {
  BackendStats::add(stats_.unsupported);
  TERN_LOG_RATELIMITED(log_limit_, warn, "{}: {} is not supported{}", kName,
                       request_name(request), need_reply ? "" : "; ignored");
  if (!need_reply) return std::nullopt;
  return Reply{reply_of(request, uint64_t{1})};
}

bool BlkSession::protocol_features_negotiated() const {
  return (acked_features_ & kProtocolFeaturesBit) != 0;
}

bool BlkSession::running(uint16_t index) const {
  return index < rings_.size() && rings_[index].worker != nullptr;
}

Result<std::optional<BlkSession::Reply>> BlkSession::handle(Request req) {
  switch (req.request) {
    case VHOST_USER_GET_FEATURES: case VHOST_USER_GET_PROTOCOL_FEATURES:
    case VHOST_USER_GET_QUEUE_NUM: case VHOST_USER_GET_MAX_MEM_SLOTS:
    case VHOST_USER_GET_VRING_BASE: case VHOST_USER_GET_CONFIG: case VHOST_USER_GET_INFLIGHT_FD:
      return reply(req);
    default: break;
  }
  auto r = execute(req);
  if (!r) {
    BackendStats::add(stats_.failed_requests);
    TERN_LOG_RATELIMITED(log_limit_, warn, "{}: {}: {}", kName, request_name(req.request),
                         r.error().message());
  }
  bool ack = req.need_reply &&
             (protocol_features_ & protocol_feature(VHOST_USER_PROTOCOL_F_REPLY_ACK)) != 0;
  if (!ack) return std::optional<Reply>();
  return std::optional<Reply>(Reply{reply_of(req.request, uint64_t{r ? 0u : 1u})});
}

Result<std::optional<BlkSession::Reply>> BlkSession::reply(const Request& req) {
  const uint32_t code = req.request;
  switch (code) {
    case VHOST_USER_GET_FEATURES:
      return std::optional<Reply>(Reply{reply_of(code, disk_.features | kProtocolFeaturesBit)});
    case VHOST_USER_GET_PROTOCOL_FEATURES:
      return std::optional<Reply>(Reply{reply_of(code, kTernProtocolFeatures)});
    case VHOST_USER_GET_QUEUE_NUM:
      return std::optional<Reply>(Reply{reply_of(code, uint64_t{disk_.config.queues})});
    case VHOST_USER_GET_MAX_MEM_SLOTS:
      return std::optional<Reply>(Reply{reply_of(code, BackendMemory::kMaxSlots)});
    case VHOST_USER_GET_VRING_BASE: {
      VhostVringState s = std::get<VhostVringState>(req.body);
      ASSIGN_OR_RETURN(Vring * v, ring(s.index));
      stop(static_cast<uint16_t>(s.index));
      v->kick.reset();  // stopped until the next SET_VRING_KICK (spec)
      s.num = v->base;
      return std::optional<Reply>(Reply{reply_of(code, s)});
    }
    case VHOST_USER_GET_CONFIG: {
      const auto& c = std::get<ConfigRequest>(req.body);
      std::vector<uint8_t> body(sizeof(VhostUserConfigHeader) + c.hdr.size, 0);
      std::memcpy(body.data(), &c.hdr, sizeof c.hdr);
      const auto* cs = reinterpret_cast<const uint8_t*>(&disk_.config_space);
      for (uint32_t i = 0; i < c.hdr.size; ++i) {
        uint64_t at = uint64_t{c.hdr.offset} + i;
        if (at < sizeof disk_.config_space) body[sizeof c.hdr + i] = cs[at];
      }
      return std::optional<Reply>(Reply{make_reply(code, body)});
    }
    case VHOST_USER_GET_INFLIGHT_FD: {
      const auto& in = std::get<VhostUserInflight>(req.body);
      if (in.num_queues > disk_.config.queues || in.queue_size > kMaxRingSize)
        return fail("vhost-user GET_INFLIGHT_FD", std::to_string(in.num_queues) + " queues of " +
                                                      std::to_string(in.queue_size) +
                                                      " is more than this disk has");
      ASSIGN_OR_RETURN(auto region, InflightRegion::create(in.num_queues, in.queue_size));
      stop_all();  // running rings write into the old region's mapping
      inflight_.emplace(std::move(region));
      restart_all();
      return std::optional<Reply>(Reply{reply_of(code, inflight_->info()), inflight_->fd().get()});
    }
    default: break;
  }
  return fail("vhost-user", std::string(request_name(code)) + ": no reply");
}

Result<BlkSession::Vring*> BlkSession::ring(uint32_t index) {
  if (index >= rings_.size())
    return fail("vring " + std::to_string(index),
                "this disk has " + std::to_string(rings_.size()) + " queues");
  return &rings_[index];
}

Result<void> BlkSession::execute(Request& req) {
  switch (req.request) {
    case VHOST_USER_SET_FEATURES: {
      uint64_t f = std::get<uint64_t>(req.body);
      if ((f & ~(disk_.features | kProtocolFeaturesBit)) != 0)
        return fail("features", "bits that were not offered");
      acked_features_ = f;  // used by rings started from now on
      return {};
    }
    case VHOST_USER_SET_PROTOCOL_FEATURES: {
      uint64_t f = std::get<uint64_t>(req.body);
      protocol_features_ = f & kTernProtocolFeatures;
      if (f != protocol_features_) return fail("protocol features", "bits that were not offered");
      return {};
    }
    case VHOST_USER_SET_OWNER: return {};
    case VHOST_USER_RESET_OWNER:
      stop_all();
      for (auto& r : rings_) {
        r.num = 0;
        r.addr_set = false;
        r.base = 0;
        r.kick.reset();
        r.enabled = false;
        r.interrupt->set_call(UniqueFd());
        r.interrupt->set_err(UniqueFd());
      }
      acked_features_ = 0;
      return {};
    case VHOST_USER_SET_MEM_TABLE: return set_mem_table(req);
    case VHOST_USER_ADD_MEM_REG:
    case VHOST_USER_REM_MEM_REG: {
      const auto& m = std::get<VhostUserMemRegMsg>(req.body);
      stop_all();
      Result<void> r;
      if (req.request == VHOST_USER_ADD_MEM_REG) {
        if (req.fds.empty()) return fail("memory region", "no fd");
        r = memory_.add(m.region, req.fds[0].borrow());
      } else {
        r = memory_.remove(m.region);
      }
      restart_all();
      return r;
    }
    case VHOST_USER_SET_VRING_NUM: {
      const auto& s = std::get<VhostVringState>(req.body);
      ASSIGN_OR_RETURN(Vring * v, ring(s.index));
      if (s.num == 0 || s.num > kMaxRingSize || (s.num & (s.num - 1)) != 0)
        return fail("vring " + std::to_string(s.index),
                    "size " + std::to_string(s.num) + " is not a power of two up to 1024");
      if (v->worker) return fail("vring " + std::to_string(s.index), "size change while running");
      v->num = static_cast<uint16_t>(s.num);
      // seg_max was read (GET_CONFIG) before the ring size was known. With INDIRECT_DESC the
      // walker takes tables longer than the ring; without it a request may not fit the ring.
      if (disk_.config_space.seg_max + 2 > s.num &&
          (acked_features_ & virtio::feature(virtio::VIRTIO_F_INDIRECT_DESC)) == 0)
        TERN_LOG_RATELIMITED(log_limit_, warn,
                             "{}: vring {}: {} entries hold fewer than seg_max {} + 2 descriptors "
                             "and INDIRECT_DESC was not negotiated: give --disk queue_size={}",
                             kName, s.index, s.num, disk_.config_space.seg_max, s.num);
      return {};
    }
    case VHOST_USER_SET_VRING_ADDR: {
      const auto& a = std::get<VhostVringAddr>(req.body);
      ASSIGN_OR_RETURN(Vring * v, ring(a.index));
      if (v->worker) return fail("vring " + std::to_string(a.index), "addresses change while running");
      v->addr = a;
      v->addr_set = true;
      if (memory_.size() > 0) {
        // Refuse addresses outside the memory table now rather than at start.
        TRY(memory_.to_gpa(a.desc_user_addr, 16));
        TRY(memory_.to_gpa(a.avail_user_addr, 4));
        TRY(memory_.to_gpa(a.used_user_addr, 4));
      }
      try_start(static_cast<uint16_t>(a.index));
      return {};
    }
    case VHOST_USER_SET_VRING_BASE: {
      const auto& s = std::get<VhostVringState>(req.body);
      ASSIGN_OR_RETURN(Vring * v, ring(s.index));
      if (v->worker) return fail("vring " + std::to_string(s.index), "base change while running");
      if (s.num > 0xffff) return fail("vring " + std::to_string(s.index), "base over 65535");
      v->base = static_cast<uint16_t>(s.num);
      return {};
    }
    case VHOST_USER_SET_VRING_KICK:
    case VHOST_USER_SET_VRING_CALL:
    case VHOST_USER_SET_VRING_ERR: {
      const auto& vf = std::get<VringFd>(req.body);
      ASSIGN_OR_RETURN(Vring * v, ring(vf.index));
      UniqueFd fd = vf.has_fd && !req.fds.empty() ? std::move(req.fds[0]) : UniqueFd();
      if (req.request != VHOST_USER_SET_VRING_KICK && fd.valid()) {
        // A queue thread writes it: a full pipe in blocking mode would stop that thread for
        // good (and every stop() that drains it). Eventfds from QEMU and tern are non-blocking.
        int fl = ::fcntl(fd.get(), F_GETFL);
        if (fl < 0 || ::fcntl(fd.get(), F_SETFL, fl | O_NONBLOCK) < 0)
          return fail_errno("fcntl", "vring " + std::to_string(vf.index) + " call/err fd");
      }
      if (req.request == VHOST_USER_SET_VRING_CALL) {
        v->interrupt->set_call(std::move(fd));
        return {};
      }
      if (req.request == VHOST_USER_SET_VRING_ERR) {
        v->interrupt->set_err(std::move(fd));
        return {};
      }
      stop(vf.index);  // the worker owns the old kick
      v->kick = std::move(fd);
      if (!v->kick.valid()) return fail("vring " + std::to_string(vf.index), "polling (no kick fd) is not supported");
      // Without PROTOCOL_FEATURES the ring is enabled from the start (spec "Ring states").
      if (!protocol_features_negotiated()) v->enabled = true;
      try_start(vf.index);
      return {};
    }
    case VHOST_USER_SET_VRING_ENABLE: {
      const auto& s = std::get<VhostVringState>(req.body);
      ASSIGN_OR_RETURN(Vring * v, ring(s.index));
      if (s.num > 1) return fail("vring " + std::to_string(s.index), "enable must be 0 or 1");
      v->enabled = s.num == 1;
      if (v->enabled)
        try_start(static_cast<uint16_t>(s.index));
      else
        stop(static_cast<uint16_t>(s.index));
      return {};
    }
    case VHOST_USER_SET_CONFIG: return fail("config", "every virtio-blk field is read-only");
    case VHOST_USER_SET_INFLIGHT_FD: {
      const auto& in = std::get<VhostUserInflight>(req.body);
      if (req.fds.empty()) return fail("inflight region", "no fd");
      ASSIGN_OR_RETURN(auto region, InflightRegion::map(in, std::move(req.fds[0])));
      stop_all();  // running rings write into the old region's mapping
      inflight_.emplace(std::move(region));
      restart_all();
      return {};
    }
    default: break;
  }
  return fail(request_name(req.request), "not handled");
}

Result<void> BlkSession::set_mem_table(Request& req) {
  const auto& t = std::get<MemTable>(req.body);
  if (req.fds.size() != t.regions.size()) return fail("memory table", "one fd per region expected");
  stop_all();  // their buffers point into the old mappings
  memory_.clear();
  Result<void> r;
  for (size_t i = 0; i < t.regions.size() && r; ++i) r = memory_.add(t.regions[i], req.fds[i].borrow());
  if (!r) {
    memory_.clear();
    return r;
  }
  restart_all();
  return {};
}

void BlkSession::try_start(uint16_t index) {
  Vring& v = rings_[index];
  if (v.worker || !v.kick.valid() || v.num == 0 || !v.addr_set || memory_.size() == 0 || !v.enabled)
    return;
  if (auto r = start(index); !r) {
    BackendStats::add(stats_.failed_requests);
    TERN_LOG_RATELIMITED(log_limit_, warn, "{}: vring {} not started: {}", kName, index,
                         r.error().message());
  }
}

Result<void> BlkSession::start(uint16_t index) {
  Vring& v = rings_[index];
  const GuestMemory& mem = memory_.mem();
  VirtqueueConfig q;
  q.size = v.num;
  ASSIGN_OR_RETURN(q.desc_gpa, memory_.to_gpa(v.addr.desc_user_addr, uint64_t{16} * v.num));
  ASSIGN_OR_RETURN(q.avail_gpa, memory_.to_gpa(v.addr.avail_user_addr, virtio::avail_ring_bytes(v.num)));
  ASSIGN_OR_RETURN(q.used_gpa, memory_.to_gpa(v.addr.used_user_addr, virtio::used_ring_bytes(v.num)));
  q.enabled = true;
  // The used index is the ring's own (the front-end never tells it; libvhost-user reads it too).
  ASSIGN_OR_RETURN(uint16_t used_idx, mem.read_obj<uint16_t>(q.used_gpa + virtio::used_idx_offset()));
  q.position = QueuePosition{v.base, used_idx};

  virtio::QueueWorkerContext ctx;
  if (inflight_ && index < inflight_->num_queues() && inflight_->queue_size() == v.num) {
    v.inflight = std::make_unique<InflightQueue>(inflight_->queue(index), v.num);
    uint16_t next_avail = v.base;
    ctx.resubmit = v.inflight->recover(mem, q.used_gpa, used_idx, next_avail);
    if (!ctx.resubmit.empty())
      spdlog::info("{}: vring {}: resubmitting {} inflight request(s)", kName, index,
                   ctx.resubmit.size());
    q.position.next_avail = next_avail;
    ctx.observer = v.inflight.get();
  }
  uint64_t acked = acked_features_ & ~kProtocolFeaturesBit;
  ASSIGN_OR_RETURN(auto engine, make_io_engine(disk_.engine, disk_.image.fd(), v.num));
  ASSIGN_OR_RETURN(auto executor, BlockExecutor::create(disk_.image, v.num, std::move(engine),
                                                        &stats_.blk.io, &log_limit_,
                                                        std::string(kName) + ": queue " +
                                                            std::to_string(index)));
  auto handler = std::make_unique<virtio::BlockQueueHandler>(
      &stats_.blk, virtio::blk_limits(disk_.config_space, disk_.image, acked), disk_.config.serial,
      std::move(executor), v.num);
  int kick = ::fcntl(v.kick.get(), F_DUPFD_CLOEXEC, 0);
  if (kick < 0) return fail_errno("fcntl", "kick fd");
  ctx.mem = &mem;
  ctx.interrupt = v.interrupt;
  ctx.queue = q;
  ctx.index = index;
  ctx.features = acked;
  ctx.name = kName;
  ctx.log_limit = &log_limit_;
  ctx.counters = &stats_.queue[index];
  ctx.tuning = virtio::blk_notify_tuning(disk_.config);
  ASSIGN_OR_RETURN(v.worker, virtio::QueueWorker::start(std::move(ctx), UniqueFd(kick),
                                                        std::move(handler)));
  return {};
}

void BlkSession::stop(uint16_t index) {
  Vring& v = rings_[index];
  if (!v.worker) return;
  QueuePosition p = v.worker->pause();  // drains: every chain taken is in the used ring
  v.worker.reset();
  v.inflight.reset();
  v.base = p.next_avail;
}

void BlkSession::stop_all() {
  for (uint16_t i = 0; i < rings_.size(); ++i) stop(i);
}

void BlkSession::restart_all() {
  for (uint16_t i = 0; i < rings_.size(); ++i) try_start(i);
}

}  // namespace tern::vhost_user
