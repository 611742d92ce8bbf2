#include "virtio/vhost_call_relay.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>

#include <cerrno>
#include <cstring>

#include "base/log.h"

namespace tern::virtio {

namespace {
constexpr uint64_t kStopTag = ~uint64_t{0};
}  // namespace

Result<std::unique_ptr<VhostCallRelay>> VhostCallRelay::start(
    std::vector<Call> calls, std::shared_ptr<VirtioInterrupt> interrupt, std::string name) {
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
  std::unique_ptr<VhostCallRelay> r(new VhostCallRelay(
      std::move(calls), std::move(interrupt), std::move(name), std::move(epoll), std::move(*stop)));
  r->thread_ = std::thread([p = r.get()] { p->run(); });
  return r;
}

VhostCallRelay::VhostCallRelay(std::vector<Call> calls, std::shared_ptr<VirtioInterrupt> interrupt,
                               std::string name, UniqueFd epoll, UniqueFd stop)
    : calls_(std::move(calls)),
      interrupt_(std::move(interrupt)),
      name_(std::move(name)),
      epoll_(std::move(epoll)),
      stop_(std::move(stop)) {}

VhostCallRelay::~VhostCallRelay() {
  uint64_t one = 1;
  if (::write(stop_.get(), &one, sizeof one) != sizeof one)
    spdlog::error("{}: vhost call relay: stop eventfd write failed", name_);
  if (thread_.joinable()) thread_.join();
  // Counts written after the thread's last read (e.g. vhost's final signal before its backend
  // was removed) are relayed here, by the caller's thread.
  for (const Call& c : calls_) relay(c);
}

void VhostCallRelay::relay(const Call& c) {
  uint64_t count = 0;
  ssize_t n = retry_eintr([&] { return ::read(c.fd.get(), &count, sizeof count); });
  if (n != sizeof count || count == 0) return;  // EAGAIN: nothing pending
  relayed_.fetch_add(1, std::memory_order_relaxed);
  interrupt_->signal_used_queue(c.queue);
}

void VhostCallRelay::run() {
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
      if (tag < calls_.size()) relay(calls_[tag]);
    }
  }
}

}  // namespace tern::virtio
