// transmitq handler: chain → frame (parse_tx_chain) → one writev(2) on the pair's tap fd.
#include <sys/uio.h>

#include <cerrno>

#include "virtio/net/net_queue_handlers.h"
#include "virtio/net/tx_frame.h"

namespace tern::net {

namespace {

using virtio::QueueWorker;

class TxHandler final : public virtio::QueueHandler {
 public:
  TxHandler(VirtioNet& dev, uint16_t pair, uint64_t acked)
      : dev_(dev), pair_(pair), fd_(dev.tap().fd(pair).get()), acked_(acked) {}

  void serve(QueueWorker& w, virtio::DescriptorChain chain) override {
    NetCounters& c = dev_.live_counters();
    const uint16_t head = chain.head;
    // hdr_ keeps the header that was checked; writev sends it from there (iov[0]).
    auto frame = parse_tx_chain(chain, acked_, hdr_, std::move(iov_));
    if (!frame) {
      // §5.1.6.2: a chain the device cannot send is returned unsent (used length 0), counted.
      NetCounters::add(c.tx_dropped_malformed);
      TERN_LOG_RATELIMITED(w.log_limit(), warn, "{}: transmitq {}: chain {} dropped: {}{}{}",
                           w.name(), pair_, head, tx_chain_error_name(frame.error().error),
                           frame.error().header ? ": " : "",
                           frame.error().header ? tx_header_error_name(*frame.error().header)
                                                : std::string_view());
      w.complete(head, 0, 0, true);
      return;
    }
    const uint64_t payload = frame->bytes - kNetHdrSize;
    ssize_t n = retry_eintr([&] {
      return ::writev(fd_, frame->iov.data(), static_cast<int>(frame->iov.size()));
    });
    if (n < 0) {
      // EIO: the tap is down; EBADFD: it was deleted; EINVAL: the kernel refused the header;
      // EAGAIN: its queue is full. The frame is dropped, the guest goes on.
      NetCounters::add(c.tx_dropped_tap_error);
      dev_.report_tap_error("writev", pair_, errno);
      w.complete(head, 0, 0, true);
    } else {
      NetCounters::add(c.tx_packets);
      NetCounters::add(c.tx_bytes, payload);
      w.complete(head, 0, payload, false);
    }
    iov_ = std::move(frame->iov);  // reused: no allocation per packet
  }

 private:
  VirtioNet& dev_;
  const uint16_t pair_;
  const int fd_;
  const uint64_t acked_;
  std::vector<iovec> iov_;
  TxHeaderBytes hdr_{};  // the current chain's header, as checked and sent
};

}  // namespace

std::unique_ptr<virtio::QueueHandler> make_tx_handler(VirtioNet& dev, uint16_t pair,
                                                     uint64_t acked) {
  return std::make_unique<TxHandler>(dev, pair, acked);
}

}  // namespace tern::net
