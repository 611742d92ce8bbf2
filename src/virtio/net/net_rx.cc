// receiveq handler: the driver's buffers held in an RxBuffers, frames read from the pair's tap
// fd straight into them (one readv(2) per frame) while they are sure to fit.
//
// No spinning: the tap fd is level-triggered in the worker's epoll. When it is readable but the
// buffers cannot take a frame, the handler stops watching it (QueueWorker::watch_fd) and counts
// a wait; the next kick that brings buffers makes flush() watch it again and read. A failing
// read (EBADFD: the tap was deleted) also stops the watch until the next buffers arrive.
// With MRG_RXBUF a driver posting chains of several descriptors may never fill the buffers to
// max_rx_frame() nor every ring entry: its RX then stalls (the tap queue drops, counted as
// rx_dropped_no_buffer), without spinning.
#include <sys/uio.h>

#include <cerrno>
#include <utility>

#include "virtio/net/net_queue_handlers.h"
#include "virtio/net/rx_buffers.h"

namespace tern::net {

namespace {

using virtio::QueueWorker;

constexpr uint32_t kTagTap = 1;
/// Frames read per wakeup before the worker publishes and looks at its other fds.
constexpr unsigned kFramesPerWakeup = 64;

class RxHandler final : public virtio::QueueHandler {
 public:
  RxHandler(VirtioNet& dev, uint16_t pair, uint16_t queue_size, uint64_t acked)
      : dev_(dev),
        pair_(pair),
        fd_(dev.tap().fd(pair)),
        queue_size_(queue_size),
        mergeable_((acked & virtio::feature(VIRTIO_NET_F_MRG_RXBUF)) != 0),
        bufs_(mergeable_, max_rx_frame(acked, dev.mtu())) {}

  std::vector<std::pair<BorrowedFd, uint32_t>> fds() override { return {{fd_, kTagTap}}; }

  void serve(QueueWorker& w, virtio::DescriptorChain chain) override {
    const uint16_t head = chain.head;
    if (!bufs_.add(std::move(chain))) {
      NetCounters::add(dev_.live_counters().rx_bad_buffers);
      TERN_LOG_RATELIMITED(w.log_limit(), warn,
                           "{}: receiveq {}: chain {} has no device-writable buffer", w.name(),
                           pair_, head);
      accepted_since_refused_ = 0;
      w.complete(head, 0, 0, true);
      return;
    }
    ++accepted_since_refused_;
    fresh_buffers_ = true;
  }

  void flush(QueueWorker& w) override {
    const bool fresh = std::exchange(fresh_buffers_, false);
    if (!bufs_.ready(ring_full())) return;  // still waiting for buffers: keep the watch as is
    // Not watched (no buffer, or the tap failed): new buffers make it worth another try, or,
    // when the driver holds no buffer back (all ring entries are here), any wakeup does.
    if (!watching_ && !fresh && bufs_.held() < queue_size_) return;
    watch(w, true);
    receive(w);
  }

  void on_fd(QueueWorker& w, uint32_t tag) override {
    if (tag != kTagTap) return;
    NetCounters::add(dev_.live_counters().rx_tap_wakeups);
    if (!bufs_.ready(ring_full())) {
      // A frame waits and the driver gave no room for it: sleep until it kicks new buffers.
      NetCounters::add(dev_.live_counters().rx_no_buffer_waits);
      watch(w, false);
      return;
    }
    receive(w);
  }

  void drain(QueueWorker& w) override {
    // Buffers not filled go back to the available ring (the positions then exclude them), or,
    // when a chain refused since makes that impossible, to the used ring with length 0.
    std::vector<uint16_t> heads = bufs_.release_all();
    const auto n = static_cast<uint16_t>(heads.size());
    if (n == 0) return;
    if (n <= accepted_since_refused_ && w.unpop(n)) {
      accepted_since_refused_ -= n;
      return;
    }
    for (uint16_t h : heads) w.complete(h, 0);
  }

 private:
  // RxBuffers::ready()'s `ring_full`: more buffers cannot come (every ring entry is held) or
  // cannot help (without MRG_RXBUF a frame goes to the first chain only, whatever follows it):
  // read, and drop what does not fit (counted), rather than wait for nothing.
  [[nodiscard]] bool ring_full() const {
    return bufs_.held() >= queue_size_ || !mergeable_;
  }

  void watch(QueueWorker& w, bool on) {
    if (watching_ == on) return;
    watching_ = on;
    w.watch_fd(kTagTap, on);
  }

  void receive(QueueWorker& w) {
    NetCounters& c = dev_.live_counters();
    for (unsigned i = 0; i < kFramesPerWakeup; ++i) {
      if (!bufs_.ready(ring_full())) return;  // a readable tap will call on_fd() (then wait)
      const std::vector<iovec>& iov = bufs_.next_read();
      ssize_t n = retry_eintr(
          [&] { return ::readv(fd_.get(), iov.data(), static_cast<int>(iov.size())); });
      if (n <= 0) {
        if (n < 0 && errno == EAGAIN) return;
        // A tap never reads 0 bytes into a non-empty iovec: 0 is an end of file (its fd is
        // not a tap queue any more), reported like an error.
        dev_.report_tap_error("readv", pair_, n < 0 ? errno : 0);
        watch(w, false);  // until the next buffers: a dead tap must not wake us in a loop
        return;
      }
      RxResult r = bufs_.complete_read(static_cast<size_t>(n));
      switch (r.kind) {
        case RxResult::Kind::kDelivered: {
          const uint64_t payload = r.frame_bytes - kNetHdrSize;
          NetCounters::add(c.rx_packets);
          NetCounters::add(c.rx_bytes, payload);
          for (size_t k = 0; k < r.used.size(); ++k)
            w.complete(r.used[k].head, r.used[k].len, k == 0 ? payload : 0);
          break;
        }
        case RxResult::Kind::kTooBig:
          NetCounters::add(c.rx_dropped_too_big);
          TERN_LOG_RATELIMITED(w.log_limit(), warn,
                               "{}: receiveq {}: frame larger than the driver's buffers dropped",
                               w.name(), pair_);
          break;
        case RxResult::Kind::kRunt:
          NetCounters::add(c.rx_dropped_runt);
          break;
      }
    }
  }

  VirtioNet& dev_;
  const uint16_t pair_;
  const BorrowedFd fd_;
  const uint16_t queue_size_;
  const bool mergeable_;
  RxBuffers bufs_;
  bool watching_ = true;  // QueueWorker::start registers the fd watched
  bool fresh_buffers_ = false;  // serve() took a buffer since the last flush()
  // Chains accepted since the last refused one: unpop() may only hand back chains served after
  // it (a refused chain already went to the used ring).
  uint32_t accepted_since_refused_ = 0;
};

}  // namespace

std::unique_ptr<virtio::QueueHandler> make_rx_handler(VirtioNet& dev, uint16_t pair,
                                                     uint16_t queue_size, uint64_t acked) {
  return std::make_unique<RxHandler>(dev, pair, queue_size, acked);
}

}  // namespace tern::net
