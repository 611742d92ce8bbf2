#include "virtio/vhost_call_relay.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>

#include <cerrno>
#include <cstring>

#include "base/cpu_affinity.h"
#include "base/log.h"
#include "virtio/virtio_spec.h"

namespace tern::virtio {

namespace {
constexpr uint64_t kStopTag = ~uint64_t{0};
constexpr uint64_t kErrorTag = uint64_t{1} << 32;  // + index in Options::errors

// Reads an eventfd's count (non-blocking): 0 when there is none.
uint64_t take_count(BorrowedFd fd) {
  uint64_t count = 0;
  ssize_t n = retry_eintr([&] { return ::read(fd.get(), &count, sizeof count); });
  return n == sizeof count ? count : 0;  // EAGAIN: nothing pending
}
}  // namespace

Result<std::unique_ptr<VhostCallRelay>> VhostCallRelay::start(
    std::vector<Call> calls, std::shared_ptr<VirtioInterrupt> interrupt, std::string name,
    Options options) {
  UniqueFd epoll(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll.valid()) return fail_errno(name, "vhost call relay: epoll_create1");
  auto stop = make_eventfd(0, EFD_NONBLOCK);
  if (!stop) return fail_code(stop.error().errnum, name, "vhost call relay: eventfd");
  auto add = [&](int fd, uint64_t tag) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = tag;
    return ::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, fd, &ev) == 0;
  };
  if (!add(stop->get(), kStopTag)) return fail_errno(name, "vhost call relay: epoll_ctl");
  for (size_t i = 0; i < calls.size(); ++i)
    if (!add(calls[i].fd.get(), i)) return fail_errno(name, "vhost call relay: epoll_ctl");
  for (size_t i = 0; i < options.errors.size(); ++i)
    if (!add(options.errors[i].fd.get(), kErrorTag + i))
      return fail_errno(name, "vhost call relay: epoll_ctl");
  std::unique_ptr<VhostCallRelay> r(new VhostCallRelay(std::move(calls), std::move(interrupt),
                                                       std::move(name), std::move(options),
                                                       std::move(epoll), std::move(*stop)));
  r->thread_ = std::thread([p = r.get()] { p->run(); });
  return r;
}

VhostCallRelay::VhostCallRelay(std::vector<Call> calls, std::shared_ptr<VirtioInterrupt> interrupt,
                               std::string name, Options options, UniqueFd epoll, UniqueFd stop)
    : calls_(std::move(calls)),
      options_(std::move(options)),
      used_seen_(calls_.size(), 0),
      interrupt_(std::move(interrupt)),
      name_(std::move(name)),
      epoll_(std::move(epoll)),
      stop_(std::move(stop)) {
  // Where each tracked used ring is now: progress is counted from here.
  for (size_t i = 0; i < calls_.size(); ++i) {
    if (!calls_[i].counters || !options_.mem) continue;
    if (auto idx = options_.mem->read_obj<uint16_t>(calls_[i].used_gpa + used_idx_offset()))
      used_seen_[i] = *idx;
  }
}

VhostCallRelay::~VhostCallRelay() {
  uint64_t one = 1;
  if (::write(stop_.get(), &one, sizeof one) != sizeof one)
    spdlog::error("{}: vhost call relay: stop eventfd write failed", name_);
  if (thread_.joinable()) thread_.join();
  // Counts written after the thread's last read (e.g. vhost's final signal before its backend
  // was removed) are relayed here, by the caller's thread.
  for (size_t i = 0; i < calls_.size(); ++i) {
    relay(i);
    account_used(i);  // entries used without a notification (suppressed) count too
  }
  for (const ErrorFd& e : options_.errors) error(e);
}

void VhostCallRelay::relay(size_t i) {
  const Call& c = calls_[i];
  if (take_count(c.fd) == 0) return;
  relayed_.fetch_add(1, std::memory_order_relaxed);
  account_used(i);  // before the interrupt: the driver may look at the counters after it
  if (c.counters) QueueCounters::add(c.counters->interrupts);
  interrupt_->signal_used_queue(c.queue);
}

void VhostCallRelay::account_used_now() {
  for (size_t i = 0; i < calls_.size(); ++i) account_used(i);
}

void VhostCallRelay::account_used(size_t i) {
  const Call& c = calls_[i];
  if (!c.counters || !options_.mem) return;
  std::lock_guard lock(used_mu_);
  auto idx = options_.mem->read_obj<uint16_t>(c.used_gpa + used_idx_offset());
  if (!idx) return;
  // Free-running 16-bit index (§2.7.8): the difference modulo 2^16 is what was added.
  QueueCounters::add(c.counters->requests, static_cast<uint16_t>(*idx - used_seen_[i]));
  used_seen_[i] = *idx;
}

void VhostCallRelay::error(const ErrorFd& e) {
  if (take_count(e.fd) != 0 && options_.on_error) options_.on_error(e.queue);
}

void VhostCallRelay::run() {
  pin_this_thread(ThreadClass::kIo);  // --cpu-affinity io
  constexpr int kMaxEvents = 16;
  epoll_event events[kMaxEvents];
  for (;;) {
    int n = ::epoll_wait(epoll_.get(), events, kMaxEvents, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      spdlog::error("{}: vhost call relay: epoll_wait: {}", name_, std::strerror(errno));
      return;
    }
    for (int i = 0; i < n; ++i) {
      uint64_t tag = events[i].data.u64;
      if (tag == kStopTag) return;
      if (tag < calls_.size()) relay(tag);
      if (tag >= kErrorTag && tag - kErrorTag < options_.errors.size())
        error(options_.errors[tag - kErrorTag]);
    }
  }
}

}  // namespace tern::virtio
