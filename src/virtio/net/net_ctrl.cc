// controlq handler (virtio 1.2 §5.1.6.5): struct virtio_net_ctrl { u8 class; u8 command;
// u8 command-specific-data[]; u8 ack; } with class/command/data device-readable and ack
// device-writable. Only VIRTIO_NET_CTRL_MQ / VQ_PAIRS_SET is served (tern offers no other
// control feature); anything else is answered VIRTIO_NET_ERR, and so is a chain without class
// and command, or one the walker refused, in its ack byte (the chain's last, device-writable). A
// chain without an ack byte cannot be answered: the queue needs a reset (a driver reading a stale
// ack must not take a command tern did not execute for VIRTIO_NET_OK).
#include <algorithm>
#include <array>
#include <cstring>

#include "virtio/net/net_queue_handlers.h"

namespace tern::net {

namespace {

using virtio::QueueWorker;

/// Readable bytes looked at: class, command and the largest data tern understands (a guest
/// may make the readable part as large as it wants; the rest is ignored).
constexpr size_t kMaxCommandBytes = 2 + 64;

class CtrlHandler final : public virtio::QueueHandler {
 public:
  CtrlHandler(VirtioNet& dev, uint64_t acked) : dev_(dev), acked_(acked) {}

  void refuse(QueueWorker& w, uint16_t head) override {
    NetCounters::add(dev_.live_counters().ctrl_malformed);
    auto tail = w.refused_tail(head);
    if (!tail) {
      w.mark_unanswerable("malformed controlq chain " + std::to_string(head) + " without an ack byte");
      return;
    }
    tail->host.back() = VIRTIO_NET_ERR;
    w.complete(head, 1, 0, true);
  }

  void serve(QueueWorker& w, virtio::DescriptorChain chain) override {
    NetCounters& c = dev_.live_counters();
    NetCounters::add(c.ctrl_commands);
    std::array<uint8_t, kMaxCommandBytes> cmd{};
    size_t got = 0;
    uint8_t* ack = nullptr;
    for (const auto& seg : chain.segments) {
      if (!seg.writable) {
        size_t n = std::min(seg.host.size(), cmd.size() - got);
        std::memcpy(cmd.data() + got, seg.host.data(), n);
        got += n;
      } else if (ack == nullptr && !seg.host.empty()) {
        ack = seg.host.data();
      }
    }
    if (got < 2 || ack == nullptr) {
      NetCounters::add(c.ctrl_malformed);
      TERN_LOG_RATELIMITED(w.log_limit(), warn, "{}: controlq: chain {} without {}", w.name(),
                           chain.head, ack == nullptr ? "an ack byte" : "class and command");
      if (ack == nullptr) {
        w.mark_unanswerable("controlq chain " + std::to_string(chain.head) + " without an ack byte");
        return;
      }
      *ack = VIRTIO_NET_ERR;
      w.complete(chain.head, 1, 0, true);
      return;
    }
    const uint8_t status = execute(w, cmd[0], cmd[1], std::span(cmd).subspan(2, got - 2));
    if (status != VIRTIO_NET_OK) NetCounters::add(c.ctrl_errors);
    *ack = status;
    w.complete(chain.head, 1, 0, status != VIRTIO_NET_OK);
  }

 private:
  uint8_t execute(QueueWorker& w, uint8_t cls, uint8_t command, std::span<const uint8_t> data) {
    const bool mq = (acked_ & virtio::feature(VIRTIO_NET_F_MQ)) != 0;
    if (cls == VIRTIO_NET_CTRL_MQ && command == VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET && mq &&
        data.size() >= 2) {
      // struct virtio_net_ctrl_mq { le16 virtqueue_pairs; } (§5.1.6.5.5)
      const auto pairs = static_cast<uint16_t>(data[0] | (data[1] << 8));
      const uint8_t status = dev_.set_queue_pairs(pairs);
      if (status != VIRTIO_NET_OK)
        TERN_LOG_RATELIMITED(w.log_limit(), warn, "{}: controlq: VQ_PAIRS_SET {} refused",
                             w.name(), pairs);
      return status;
    }
    TERN_LOG_RATELIMITED(w.log_limit(), debug, "{}: controlq: class {} command {} unsupported",
                         w.name(), cls, command);
    return VIRTIO_NET_ERR;
  }

  VirtioNet& dev_;
  const uint64_t acked_;
};

}  // namespace

std::unique_ptr<virtio::QueueHandler> make_ctrl_handler(VirtioNet& dev, uint64_t acked) {
  return std::make_unique<CtrlHandler>(dev, acked);
}

}  // namespace tern::net
