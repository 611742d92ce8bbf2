#include "virtio/rng/virtio_rng.h"

#include <sys/random.h>

#include <chrono>
#include <cstring>

#include "base/timer_fd.h"
#include "virtio/rng/virtio_rng_device.h"
#include "virtio/virtio_spec.h"

namespace tern {

using virtio::QueueWorker;

namespace {
constexpr uint32_t kTagTimer = 1;

Result<void> validate_bucket(const std::optional<TokenBucketConfig>& b, const char* field) {
  if (!b) return {};
  std::string f = std::string("rate_limiter.") + field;
  if (b->size == 0) return fail("--rng", f + ".size: must be > 0");
  if (b->refill_time_ms == 0) return fail("--rng", f + ".refill_time_ms: must be > 0");
  return {};
}

std::optional<TokenBucket> make_bucket(const std::optional<TokenBucketConfig>& b, uint64_t now) {
  if (!b) return std::nullopt;
  // A period past 2^64 ns (585 years; check_rng_config admits up to 2^50 ms) saturates.
  constexpr uint64_t kNsPerMs = 1'000'000;
  uint64_t refill_ns =
      b->refill_time_ms > UINT64_MAX / kNsPerMs ? UINT64_MAX : b->refill_time_ms * kNsPerMs;
  return TokenBucket(b->size, b->one_time_burst, refill_ns, now);
}

uint64_t steady_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}
}  // namespace

Result<void> validate_rng_config(const RngConfig& config) {
  TRY(validate_bucket(config.rate_limiter.bandwidth, "bandwidth"));
  TRY(validate_bucket(config.rate_limiter.ops, "ops"));
  return {};
}

/// The request queue's handler: fills writable buffers from getrandom within the rate limit.
class RngQueueHandler final : public virtio::QueueHandler {
 public:
  RngQueueHandler(VirtioRng& dev, TimerFd timer) : dev_(dev), timer_(std::move(timer)) {}

  std::vector<std::pair<BorrowedFd, uint32_t>> fds() override { return {{timer_.fd(), kTagTimer}}; }

  bool ready(QueueWorker& w) override {
    if (!dev_.bandwidth_ && !dev_.ops_) return true;
    uint64_t now = dev_.clock_();
    uint64_t wait = 0;
    if (dev_.bandwidth_) wait = std::max(wait, dev_.bandwidth_->ns_until(1, now));
    if (dev_.ops_) wait = std::max(wait, dev_.ops_->ns_until(1, now));
    if (wait == 0) return true;
    if (!armed_) {
      // Throttled: take no chains until the timerfd says a token is back (no spinning).
      VirtioRng::Counters::add(dev_.counters_.throttled);
      if (auto r = timer_.arm(wait); !r) {
        TERN_LOG_RATELIMITED(w.log_limit(), warn, "{}: rate limit timer: {}", w.name(),
                             r.error().message());
        return true;  // better unthrottled than stuck
      }
      armed_ = true;
    }
    return false;
  }

  void serve(QueueWorker& w, virtio::DescriptorChain chain) override {
    uint64_t now = dev_.clock_();
    if (dev_.ops_) dev_.ops_->take(1, now);
    VirtioRng::Counters::add(dev_.counters_.requests);
    if (chain.writable_bytes == 0) {
      // Nothing to fill (device-readable buffers are ignored): returned with used len 0.
      VirtioRng::Counters::add(dev_.counters_.no_buffer);
      TERN_LOG_RATELIMITED(w.log_limit(), debug, "{}: chain {} has no device-writable buffer",
                           w.name(), chain.head);
      w.complete(chain.head, 0, 0, true);
      return;
    }
    uint64_t want = std::min<uint64_t>(chain.writable_bytes, VirtioRng::kMaxBytesPerRequest);
    if (dev_.bandwidth_) want = std::min(want, dev_.bandwidth_->available(now));
    uint64_t done = 0;
    for (const auto& seg : chain.segments) {
      if (!seg.writable || done == want) continue;
      size_t n = static_cast<size_t>(std::min<uint64_t>(seg.host.size(), want - done));
      size_t got = fill(w, seg.host.data(), n);
      done += got;
      if (got < n) break;  // entropy unavailable for now: hand over what we have
    }
    if (dev_.bandwidth_) dev_.bandwidth_->take(done, now);
    VirtioRng::Counters::add(dev_.counters_.bytes, done);
    w.complete(chain.head, static_cast<uint32_t>(done), done, done == 0);
  }

  void on_fd(QueueWorker&, uint32_t tag) override {
    if (tag != kTagTimer) return;
    timer_.consume();
    armed_ = false;  // the worker re-checks the ring (and ready()) next
  }

 private:
  // Fills [p, p + n) from getrandom(2) without blocking; returns the bytes filled.
  size_t fill(QueueWorker& w, uint8_t* p, size_t n) {
    size_t done = 0;
    while (done < n) {
      ssize_t r = ::getrandom(p + done, n - done, GRND_NONBLOCK);
      if (r > 0) {
        done += static_cast<size_t>(r);
        continue;
      }
      if (r < 0 && errno == EINTR) continue;
      // EAGAIN: the host pool is not initialised yet (early boot); other errors are logged.
      VirtioRng::Counters::add(dev_.counters_.entropy_errors);
      TERN_LOG_RATELIMITED(w.log_limit(), warn, "{}: getrandom: {}", w.name(),
                           r < 0 ? std::strerror(errno) : "returned 0");
      break;
    }
    return done;
  }

  VirtioRng& dev_;
  TimerFd timer_;
  bool armed_ = false;
};

Result<std::shared_ptr<VirtioRng>> VirtioRng::create(const RngConfig& config, std::string name,
                                                     Clock clock) {
  TRY(validate_rng_config(config));
  if (!clock) clock = steady_ns;
  return std::shared_ptr<VirtioRng>(new VirtioRng(config, std::move(name), std::move(clock)));
}

VirtioRng::VirtioRng(RngConfig config, std::string name, Clock clock)
    : VirtioDeviceBase(virtio::VIRTIO_ID_ENTROPY, std::move(name),
                       virtio::feature(virtio::VIRTIO_F_VERSION_1) |
                           virtio::feature(virtio::VIRTIO_F_INDIRECT_DESC) |
                           virtio::feature(virtio::VIRTIO_F_EVENT_IDX),
                       1, kQueueSize),
      config_(std::move(config)),
      clock_(std::move(clock)) {
  uint64_t now = clock_();
  bandwidth_ = make_bucket(config_.rate_limiter.bandwidth, now);
  ops_ = make_bucket(config_.rate_limiter.ops, now);
}

VirtioRng::~VirtioRng() { reset(); }

void VirtioRng::read_config(uint64_t, std::span<uint8_t> data) {
  std::memset(data.data(), 0, data.size());
}

Result<std::unique_ptr<virtio::QueueHandler>> VirtioRng::make_queue_handler(
    uint16_t, const VirtqueueConfig&, uint64_t) {
  ASSIGN_OR_RETURN(TimerFd timer, TimerFd::create());
  return std::make_unique<RngQueueHandler>(*this, std::move(timer));
}

void VirtioRng::device_counters(std::vector<std::pair<std::string, uint64_t>>& out) const {
  auto g = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  out.insert(out.end(),
             {{"bytes", g(counters_.bytes)},
              {"requests", g(counters_.requests)},
              {"throttled", g(counters_.throttled)},
              {"no_buffer", g(counters_.no_buffer)},
              {"entropy_errors", g(counters_.entropy_errors)},
              {"malformed_chains", sum_queues(&virtio::QueueCounters::malformed)},
              {"needs_reset", sum_queues(&virtio::QueueCounters::needs_reset)}});
}

Result<std::shared_ptr<VirtioDevice>> make_virtio_rng(const RngConfig& config, std::string name) {
  ASSIGN_OR_RETURN(auto dev, VirtioRng::create(config, std::move(name)));
  return std::shared_ptr<VirtioDevice>(std::move(dev));
}

}  // namespace tern
