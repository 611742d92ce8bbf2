#include "virtio/queue_worker.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <cstring>

#include "base/cpu_affinity.h"
#include "base/clock.h"

namespace tern::virtio {

namespace {
// Worker-owned fds; a handler's fd tag t is registered as kHandlerTag | t.
constexpr uint64_t kTagKick = 1, kTagStop = 2, kTagPause = 3, kTagCoalesce = 4;
constexpr uint64_t kHandlerTag = uint64_t{1} << 32;

// Reads (clears) a non-blocking eventfd; returns its value (0 if it was not signalled).
uint64_t read_eventfd(int fd) {
  uint64_t v = 0;
  if (retry_eintr([&] { return ::read(fd, &v, sizeof v); }) != sizeof v) return 0;
  return v;
}

// Arms (us > 0) or disarms (us == 0) a one-shot timerfd.
void set_timer(int fd, uint32_t us) {
  itimerspec t{};
  t.it_value.tv_sec = us / 1'000'000;
  t.it_value.tv_nsec = static_cast<long>(us % 1'000'000) * 1000;
  ::timerfd_settime(fd, 0, &t, nullptr);
}
}  // namespace

QueueWorker::QueueWorker(QueueWorkerContext ctx, UniqueFd kick,
                         std::unique_ptr<QueueHandler> handler)
    : ctx_(std::move(ctx)),
      vq_(*ctx_.mem, ctx_.queue, ctx_.features),
      kick_(std::move(kick)),
      handler_(std::move(handler)),
      published_(ctx_.queue.position.next_used) {}

Result<std::unique_ptr<QueueWorker>> QueueWorker::start(QueueWorkerContext ctx, UniqueFd kick,
                                                        std::unique_ptr<QueueHandler> handler) {
  TERN_CHECK(ctx.mem != nullptr && ctx.log_limit != nullptr && ctx.counters != nullptr &&
             ctx.interrupt != nullptr && handler != nullptr);
  std::unique_ptr<QueueWorker> w(
      new QueueWorker(std::move(ctx), std::move(kick), std::move(handler)));
  TRY(w->vq_.validate());
  ASSIGN_OR_RETURN(w->stop_, make_eventfd(0, EFD_NONBLOCK));
  ASSIGN_OR_RETURN(w->pause_, make_eventfd(0, EFD_NONBLOCK));
  // The kick eventfd is read without blocking: a spurious wakeup must not stall the worker.
  int fl = ::fcntl(w->kick_.get(), F_GETFL);
  if (fl < 0 || ::fcntl(w->kick_.get(), F_SETFL, fl | O_NONBLOCK) != 0)
    return fail_errno("fcntl", "queue kick eventfd");
  int ep = ::epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) return fail_errno("epoll_create1");
  w->epoll_.reset(ep);
  TERN_CHECK(w->ctx_.tuning.coalesce_us <= kMaxNotifyTuningUs &&
             w->ctx_.tuning.poll_us <= kMaxNotifyTuningUs);
  std::vector<std::pair<int, uint64_t>> fds{
      {w->kick_.get(), kTagKick}, {w->stop_.get(), kTagStop}, {w->pause_.get(), kTagPause}};
  if (w->ctx_.tuning.coalesce_us > 0) {
    int t = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (t < 0) return fail_errno("timerfd_create", "interrupt coalescing timer");
    w->coalesce_timer_.reset(t);
    fds.emplace_back(t, kTagCoalesce);
  }
  for (auto [fd, tag] : w->handler_->fds()) {
    fds.emplace_back(fd.get(), kHandlerTag | tag);
    w->handler_fds_.emplace_back(fd.get(), kHandlerTag | tag);
  }
  for (auto [fd, tag] : fds) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = tag;
    if (::epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) return fail_errno("epoll_ctl");
  }
  w->thread_ = std::thread([p = w.get()] { p->run(); });
  return w;
}

QueueWorker::~QueueWorker() {
  if (thread_.joinable()) {
    {
      std::lock_guard lock(park_mu_);
      stopping_ = true;
      yield_.store(true, std::memory_order_relaxed);
    }
    park_cv_.notify_all();
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(stop_.get(), &one, sizeof one);
    thread_.join();
  }
}

void QueueWorker::run() {
  // Named as the queue is in the statistics ("virtio-net0/q1"), so tern stat can put the
  // thread's CPU time next to the queue's requests (comm holds 15 bytes).
  std::string comm = ctx_.name + "/q" + std::to_string(ctx_.index);
  pthread_setname_np(pthread_self(), comm.substr(0, 15).c_str());
  pin_this_thread(ThreadClass::kIo);  // --cpu-affinity io
  // A kick may have arrived before the eventfd was handed to us.
  process_queue();
  for (;;) {
    epoll_event evs[8];
    int n = ::epoll_wait(epoll_.get(), evs, 8, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      spdlog::error("{}: queue {}: epoll_wait: {}", ctx_.name, ctx_.index, std::strerror(errno));
      break;
    }
    bool stop = false, pause = false;
    for (int i = 0; i < n; ++i) {
      uint64_t tag = evs[i].data.u64;
      if (tag == kTagKick) {
        // The eventfd's value is the number of notifications since the last read.
        QueueCounters::add(ctx_.counters->kicks, read_eventfd(kick_.get()));
      } else if (tag == kTagStop) {
        stop = true;
      } else if (tag == kTagPause) {
        read_eventfd(pause_.get());
        pause = true;
      } else if (tag == kTagCoalesce) {
        // The held notification's time is up (a timerfd reads like an eventfd: expirations).
        read_eventfd(coalesce_timer_.get());
        timer_armed_ = false;
        if (irq_held_ && !broken_) signal_used();
      } else {
        // Even on a broken queue: the handler must reap what it started (e.g. engine I/O).
        handler_->on_fd(*this, static_cast<uint32_t>(tag));
      }
    }
    if (stop) break;
    publish();  // what on_fd() completed
    // Quiesce: no new requests until resumed (a kick drained above is re-checked then).
    if (pause && !park()) break;
    // Kicked, or the handler became ready again: serve the ring.
    process_queue();
  }
  // Stopping: finish what the handler holds (its buffers are guest memory) and publish it.
  drain();
  std::lock_guard lock(park_mu_);
  // A worker that ended (stop, or an epoll failure) reports where it stopped to a later pause().
  parked_at_ = QueuePosition{vq_.last_avail_idx(), vq_.used_idx()};
  exited_ = true;
  park_cv_.notify_all();
}

void QueueWorker::drain() {
  handler_->drain(*this);
  publish();
}

void QueueWorker::process_queue() {
  while (!broken_) {
    while (!broken_ && !yield_requested() && handler_->ready(*this)) {
      bool resubmitted = next_resubmit_ < ctx_.resubmit.size();
      PopResult p = resubmitted ? vq_.walk(ctx_.resubmit[next_resubmit_++]) : vq_.pop();
      if (p.kind == PopResult::Kind::kEmpty) break;
      if (ctx_.observer != nullptr && !resubmitted && p.kind != PopResult::Kind::kFatal)
        ctx_.observer->on_pop(p.head);
      if (p.kind == PopResult::Kind::kFatal) {
        mark_broken(p.reason);
        break;
      }
      QueueCounters::add(ctx_.counters->requests);
      if (p.kind == PopResult::Kind::kMalformed) {
        QueueCounters::add(ctx_.counters->malformed);
        TERN_LOG_RATELIMITED(*ctx_.log_limit, warn, "{}: queue {}: malformed chain: {}", ctx_.name,
                             ctx_.index, p.reason);
        served_since_malformed_ = 0;
        handler_->refuse(*this, p.head);
        continue;
      }
      ++served_since_malformed_;
      handler_->serve(*this, std::move(p.chain));
    }
    if (!broken_) handler_->flush(*this);
    publish();
    if (broken_ || !handler_->ready(*this)) return;  // the handler's fd will call us again
    // A pause or stop waits in epoll: run() handles it (after a resume it calls us again).
    if (yield_requested()) return;
    if (handler_->in_flight() > 0 && ctx_.tuning.kick_suppress) {
      // A completion will wake us and run this loop again: the driver need not notify until
      // nothing is in flight (then the branch below re-enables and re-checks).
      if (auto r = vq_.disable_notification(); !r) mark_broken(r.error().message());
      return;
    }
    if (handler_->in_flight() == 0 && ctx_.tuning.poll_us > 0 && poll_available()) continue;
    if (broken_) return;
    auto more = vq_.enable_notification();
    if (!more) {
      mark_broken(more.error().message());
      return;
    }
    if (!*more) return;
  }
}

void QueueHandler::refuse(QueueWorker& w, uint16_t head) { w.complete(head, 0, 0, true); }

void QueueWorker::complete(uint16_t head, uint32_t used_len, uint64_t bytes, bool error) {
  if (bytes > 0) QueueCounters::add(ctx_.counters->bytes, bytes);
  if (error) QueueCounters::add(ctx_.counters->errors);
  if (broken_) return;
  if (auto r = vq_.add_used(head, used_len); !r) {
    mark_broken(r.error().message());
    return;
  }
  if (ctx_.observer != nullptr) ctx_.observer->on_used(head);
  ++unpublished_;
}

void QueueWorker::watch_fd(uint32_t tag, bool watched) {
  for (auto [fd, t] : handler_fds_) {
    if (t != (kHandlerTag | tag)) continue;
    // Removed, not modified to no events: epoll always reports EPOLLERR / EPOLLHUP, and a
    // deleted tap's fd is EPOLLERR forever (a busy loop). ENOENT / EEXIST: already so.
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = t;
    int r = ::epoll_ctl(epoll_.get(), watched ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, fd, &ev);
    if (r != 0 && errno != (watched ? EEXIST : ENOENT))
      TERN_LOG_RATELIMITED(*ctx_.log_limit, warn, "{}: queue {}: epoll_ctl: {}", ctx_.name,
                           ctx_.index, std::strerror(errno));
  }
}

bool QueueWorker::unpop(uint16_t n) {
  if (n == 0) return true;
  // Inflight tracking has no way to take a popped head back (and virtio-blk never unpops).
  TERN_CHECK(ctx_.observer == nullptr);
  if (n > served_since_malformed_) return false;
  vq_.unpop(n);
  served_since_malformed_ -= n;
  ctx_.counters->requests.fetch_sub(n, std::memory_order_relaxed);  // popped again later
  return true;
}

void QueueWorker::publish() {
  if (broken_) return;
  bool observe = ctx_.observer != nullptr && vq_.used_idx() != published_;
  if (observe) ctx_.observer->on_before_publish(vq_.used_idx());
  auto notify = vq_.publish_used();
  if (!notify) {
    mark_broken(notify.error().message());
    return;
  }
  published_ = vq_.used_idx();
  if (observe) ctx_.observer->on_published(published_);
  // With coalescing, a notification is held while other chains are in flight (their
  // completions will share it) and sent when the timer fires or nothing is in flight any more.
  // A held notification stays owed: the driver's used_event has not moved, so the next publishes
  // need none of their own (vring_need_event is false for them).
  const bool hold = ctx_.tuning.coalesce_us > 0 && handler_->in_flight() > 0;
  if (*notify) {
    if (!hold) {
      // A held notification goes out with this one: one interrupt for both.
      if (irq_held_) QueueCounters::add(ctx_.counters->interrupts_coalesced);
      signal_used();
    } else {
      if (irq_held_) QueueCounters::add(ctx_.counters->interrupts_coalesced);
      irq_held_ = true;
      if (!timer_armed_) {
        set_timer(coalesce_timer_.get(), ctx_.tuning.coalesce_us);
        timer_armed_ = true;
      }
    }
  } else if (unpublished_ > 0) {
    if (irq_held_)
      QueueCounters::add(ctx_.counters->interrupts_coalesced);  // covered by the held one
    else
      QueueCounters::add(ctx_.counters->interrupts_suppressed);
  }
  if (irq_held_ && !hold) signal_used();
  unpublished_ = 0;
}

void QueueWorker::signal_used() {
  irq_held_ = false;
  if (timer_armed_) {
    set_timer(coalesce_timer_.get(), 0);
    timer_armed_ = false;
  }
  QueueCounters::add(ctx_.counters->interrupts);
  ctx_.interrupt->signal_used_queue(ctx_.index);
}

bool QueueWorker::poll_available() {
  // Notifications off while we watch: a request arriving now needs no notify write (with
  // EVENT_IDX avail_event is already behind; without it this sets VIRTQ_USED_F_NO_NOTIFY).
  if (auto r = vq_.disable_notification(); !r) {
    mark_broken(r.error().message());
    return false;
  }
  const uint64_t start = monotonic_ns();
  const uint64_t limit = uint64_t{ctx_.tuning.poll_us} * 1000;
  uint64_t now = start;
  bool hit = false;
  // Bounded by poll_us, and cut short by a pause or stop request (nothing is in flight, so no
  // completion waits).
  while (now - start < limit && !yield_requested()) {
    auto more = vq_.has_available();
    if (!more) {
      mark_broken(more.error().message());
      break;
    }
    if (*more) {
      hit = true;
      break;
    }
    __builtin_ia32_pause();
    now = monotonic_ns();
  }
  QueueCounters::add(ctx_.counters->poll_ns, monotonic_ns() - start);
  if (hit) QueueCounters::add(ctx_.counters->poll_hits);
  return hit;
}

void QueueWorker::mark_broken(const std::string& why) {
  if (broken_) return;
  broken_ = true;
  QueueCounters::add(ctx_.counters->needs_reset);
  TERN_LOG_RATELIMITED(*ctx_.log_limit, warn, "{}: queue {}: {}; device needs reset", ctx_.name,
                       ctx_.index, why);
  ctx_.interrupt->set_needs_reset();
}

QueuePosition QueueWorker::pause() {
  {
    std::lock_guard lock(park_mu_);
    if (exited_) return parked_at_;
    pause_requested_ = true;
    yield_.store(true, std::memory_order_relaxed);
  }
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(pause_.get(), &one, sizeof one);
  std::unique_lock lock(park_mu_);
  park_cv_.wait(lock, [&] { return parked_ || exited_; });
  return parked_at_;
}

void QueueWorker::resume() {
  std::unique_lock lock(park_mu_);
  if (!pause_requested_) return;
  pause_requested_ = false;
  park_cv_.notify_all();
  // Return once the worker is running again, so a following pause() parks it afresh.
  park_cv_.wait(lock, [&] { return !parked_ || exited_; });
}

bool QueueWorker::park() {
  // Every chain taken from the ring completes into the used ring, published with its interrupt:
  // after this the ring positions describe the whole queue state.
  drain();
  std::unique_lock lock(park_mu_);
  parked_at_ = QueuePosition{vq_.last_avail_idx(), vq_.used_idx()};
  parked_ = true;
  park_cv_.notify_all();
  park_cv_.wait(lock, [&] { return !pause_requested_ || stopping_; });
  if (!stopping_) yield_.store(false, std::memory_order_relaxed);
  parked_ = false;
  park_cv_.notify_all();
  return !stopping_;
}

}  // namespace tern::virtio
