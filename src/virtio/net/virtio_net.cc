// VirtioNet: features, configuration space, feature checks, activation (offloads, queue pairs),
// vhost-net hand-off, counters, device state. The queue handlers are in net_rx.cc, net_tx.cc
// and net_ctrl.cc.
#include "virtio/net/virtio_net.h"

#include <linux/if_tun.h>

#include <cstring>

#include "virtio/net/net_header.h"
#include "virtio/net/net_queue_handlers.h"
#include "virtio/net/vhost_net_queues.h"
#include "virtio/net/virtio_net_device.h"
#include "virtio/virtio_spec.h"

namespace tern {

using net::NetCounters;
using virtio::feature;

namespace {

constexpr uint8_t kStateVersion = 1;

/// Ring/transport features vhost-net must serve itself to be offered with vhost=on.
constexpr uint64_t kVhostServed =
    feature(virtio::VIRTIO_F_VERSION_1) | feature(virtio::VIRTIO_F_EVENT_IDX) |
    feature(virtio::VIRTIO_F_INDIRECT_DESC) | feature(net::VIRTIO_NET_F_MRG_RXBUF);

/// The features offered for `config` over a tap accepting the TUN_F_* flags `tun`.
uint64_t offered_features(const NetConfig& config, unsigned tun) {
  using namespace net;
  uint64_t f = feature(virtio::VIRTIO_F_VERSION_1) | feature(virtio::VIRTIO_F_EVENT_IDX) |
               feature(virtio::VIRTIO_F_INDIRECT_DESC) | feature(VIRTIO_NET_F_STATUS) |
               feature(VIRTIO_NET_F_CSUM) | feature(VIRTIO_NET_F_MRG_RXBUF) |
               feature(VIRTIO_NET_F_CTRL_VQ);
  if (config.guest_mac) f |= feature(VIRTIO_NET_F_MAC);
  if (config.mtu) f |= feature(VIRTIO_NET_F_MTU);
  if (config.queue_pairs > 1) f |= feature(VIRTIO_NET_F_MQ);
  // Both directions need the tap: RX offloads are TUNSETOFFLOAD flags; a tap that does not take
  // a flag is from a kernel that does not handle those GSO frames written to it either.
  if (tun & TUN_F_CSUM) {
    f |= feature(VIRTIO_NET_F_GUEST_CSUM);
    if (tun & TUN_F_TSO4) f |= feature(VIRTIO_NET_F_GUEST_TSO4) | feature(VIRTIO_NET_F_HOST_TSO4);
    if (tun & TUN_F_TSO6) f |= feature(VIRTIO_NET_F_GUEST_TSO6) | feature(VIRTIO_NET_F_HOST_TSO6);
    if (tun & TUN_F_TSO_ECN)
      f |= feature(VIRTIO_NET_F_GUEST_ECN) | feature(VIRTIO_NET_F_HOST_ECN);
    if (tun & TUN_F_UFO) f |= feature(VIRTIO_NET_F_GUEST_UFO) | feature(VIRTIO_NET_F_HOST_UFO);
  }
  return f;
}

void put_le16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}

}  // namespace

Result<std::shared_ptr<VirtioNet>> VirtioNet::create(const NetConfig& config, std::string name,
                                                     net::Tap tap, bool vhost) {
  if (config.queue_pairs == 0 || config.queue_pairs > kMaxNetQueuePairs)
    return fail(name, "queue_pairs " + std::to_string(config.queue_pairs) + " not in 1.." +
                          std::to_string(kMaxNetQueuePairs));
  if (tap.pairs() != config.queue_pairs)
    return fail(name, "tap has " + std::to_string(tap.pairs()) + " queues, config " +
                          std::to_string(config.queue_pairs));
  uint64_t features = offered_features(config, tap.supported_offloads());
  if (vhost) features &= ~kVhostServed | net::vhost_net_ring_features();
  return std::shared_ptr<VirtioNet>(
      new VirtioNet(config, std::move(name), std::move(tap), vhost, features));
}

VirtioNet::VirtioNet(const NetConfig& config, std::string name, net::Tap tap, bool vhost,
                     uint64_t features)
    : VirtioDeviceBase(virtio::VIRTIO_ID_NET, std::move(name), features,
                       static_cast<uint16_t>(2 * config.queue_pairs + 1), kQueueSize),
      config_(config),
      tap_(std::move(tap)),
      vhost_(vhost),
      tap_tx_dropped_base_(tap_.stat("tx_dropped")) {}

VirtioNet::~VirtioNet() { reset(); }

Result<void> VirtioNet::check_features(uint64_t acked) const {
  using namespace net;
  auto has = [&](unsigned bit) { return (acked & feature(bit)) != 0; };
  struct Dep {
    unsigned bit;
    unsigned needs, or_needs;  // or_needs == needs: one requirement
    const char* text;
  };
  static constexpr Dep kDeps[] = {
      {VIRTIO_NET_F_GUEST_TSO4, VIRTIO_NET_F_GUEST_CSUM, VIRTIO_NET_F_GUEST_CSUM,
       "GUEST_TSO4 requires GUEST_CSUM"},
      {VIRTIO_NET_F_GUEST_TSO6, VIRTIO_NET_F_GUEST_CSUM, VIRTIO_NET_F_GUEST_CSUM,
       "GUEST_TSO6 requires GUEST_CSUM"},
      {VIRTIO_NET_F_GUEST_UFO, VIRTIO_NET_F_GUEST_CSUM, VIRTIO_NET_F_GUEST_CSUM,
       "GUEST_UFO requires GUEST_CSUM"},
      {VIRTIO_NET_F_GUEST_ECN, VIRTIO_NET_F_GUEST_TSO4, VIRTIO_NET_F_GUEST_TSO6,
       "GUEST_ECN requires GUEST_TSO4 or GUEST_TSO6"},
      {VIRTIO_NET_F_HOST_TSO4, VIRTIO_NET_F_CSUM, VIRTIO_NET_F_CSUM, "HOST_TSO4 requires CSUM"},
      {VIRTIO_NET_F_HOST_TSO6, VIRTIO_NET_F_CSUM, VIRTIO_NET_F_CSUM, "HOST_TSO6 requires CSUM"},
      {VIRTIO_NET_F_HOST_UFO, VIRTIO_NET_F_CSUM, VIRTIO_NET_F_CSUM, "HOST_UFO requires CSUM"},
      {VIRTIO_NET_F_HOST_ECN, VIRTIO_NET_F_HOST_TSO4, VIRTIO_NET_F_HOST_TSO6,
       "HOST_ECN requires HOST_TSO4 or HOST_TSO6"},
      {VIRTIO_NET_F_MQ, VIRTIO_NET_F_CTRL_VQ, VIRTIO_NET_F_CTRL_VQ, "MQ requires CTRL_VQ"},
  };
  for (const Dep& d : kDeps)
    if (has(d.bit) && !has(d.needs) && !has(d.or_needs))
      return fail(std::string(name()), std::string("features (virtio 1.2 §5.1.3.1): ") + d.text);
  return {};
}

void VirtioNet::read_config(uint64_t offset, std::span<uint8_t> data) {
  // struct virtio_net_config: mac[6], le16 status, le16 max_virtqueue_pairs, le16 mtu.
  uint8_t cfg[net::kNetConfigSize] = {};
  if (config_.guest_mac) std::memcpy(cfg, config_.guest_mac->data(), 6);
  put_le16(cfg + 6, net::VIRTIO_NET_S_LINK_UP);
  put_le16(cfg + 8, config_.queue_pairs);
  put_le16(cfg + 10, mtu());
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = offset + i < sizeof cfg ? cfg[offset + i] : 0;
}

VirtioNet::QueueRole VirtioNet::role(uint16_t index, uint64_t acked) const {
  const uint16_t n = config_.queue_pairs;
  const bool mq = (acked & feature(net::VIRTIO_NET_F_MQ)) != 0;
  // §5.1.2: without MQ only receiveq1, transmitq1 and the controlq at 2 exist for the driver.
  const uint16_t ctrl = mq ? static_cast<uint16_t>(2 * n) : 2;
  if (index == ctrl) return QueueRole::kCtrl;
  if (index < (mq ? 2 * n : 2)) return index % 2 == 0 ? QueueRole::kRx : QueueRole::kTx;
  return QueueRole::kUnused;
}

Result<std::unique_ptr<virtio::QueueHandler>> VirtioNet::make_queue_handler(
    uint16_t index, const VirtqueueConfig& queue, uint64_t acked) {
  const auto pair = static_cast<uint16_t>(index / 2);
  switch (role(index, acked)) {
    case QueueRole::kRx:
      return net::make_rx_handler(*this, pair, queue.size, acked);
    case QueueRole::kTx:
      return net::make_tx_handler(*this, pair, acked);
    case QueueRole::kCtrl:
      if (!(acked & feature(net::VIRTIO_NET_F_CTRL_VQ)))
        return fail("controlq", "enabled without VIRTIO_NET_F_CTRL_VQ");
      return net::make_ctrl_handler(*this, acked);
    case QueueRole::kUnused:
      break;
  }
  return fail("virtio-net", "queue " + std::to_string(index) +
                                " enabled but not used with the negotiated features (MQ off)");
}

bool VirtioNet::vhost_serves(uint64_t acked) {
  return (acked & feature(net::VIRTIO_NET_F_MRG_RXBUF)) != 0;
}

bool VirtioNet::external_queue(uint16_t index, uint64_t acked) const {
  QueueRole r = role(index, acked);
  return vhost_ && vhost_serves(acked) && (r == QueueRole::kRx || r == QueueRole::kTx);
}

Result<std::unique_ptr<virtio::ExternalQueues>> VirtioNet::start_external(
    const GuestMemory& mem, uint64_t acked, std::vector<virtio::ExternalQueue> queues,
    std::shared_ptr<VirtioInterrupt> interrupt) {
  net::VhostNetObserver observer;
  for (uint16_t i = 0; i < num_queues(); ++i)
    observer.queue_counters.push_back(&live_queue_counters(i));
  observer.on_vring_error = [this](uint16_t queue) {
    NetCounters::add(counters_.vhost_vring_errors);
    virtio::QueueCounters::add(live_queue_counters(queue).needs_reset);
  };
  return net::start_vhost_net(mem, acked, std::move(queues), tap_.fds(), std::move(interrupt),
                              std::string(name()), std::move(observer));
}

Result<void> VirtioNet::on_activate(uint64_t acked) {
  if (vhost_ && !vhost_serves(acked)) {
    NetCounters::add(counters_.vhost_userspace_activations);
    if (!vhost_fallback_logged_.exchange(true))
      spdlog::warn(
          "{}: the driver did not negotiate VIRTIO_NET_F_MRG_RXBUF: RX/TX are served in "
          "userspace, not by vhost-net (which leaves num_buffers unset, virtio 1.2 "
          "§5.1.6.4), until a driver negotiates it",
          name());
  }
  const unsigned offloads = net::tap_offloads_for(acked, tap_.supported_offloads());
  if (auto r = tap_.set_offloads(offloads); !r) {
    // A deleted tap (EBADFD) hands us no frame anyway; any other failure could let frames the
    // driver did not negotiate through (Firecracker #4659): refuse the activation.
    report_tap_error("TUNSETOFFLOAD", 0, r.error().errnum);
    if (r.error().errnum != EBADFD && r.error().errnum != ENODEV) return r;
  }
  std::lock_guard lock(pairs_mu_);
  const uint16_t pairs = restored_pairs_.value_or(1);
  restored_pairs_.reset();
  if (pairs > 1 && !(acked & feature(net::VIRTIO_NET_F_MQ)))
    return fail("virtio-net", std::to_string(pairs) +
                                  " active queue pairs restored without VIRTIO_NET_F_MQ");
  // §5.1.6.5.5: after reset only receiveq1/transmitq1 are used. A tap error is reported and
  // counted but does not stop the device (the tap may come back).
  (void)apply_queue_pairs_locked(pairs);
  return {};
}

void VirtioNet::on_reset() {
  // §5.1.6.5.5: after a reset only the first pair is used (the tap's queues are set again at
  // the next activation); a snapshot of a reset device so saves 1.
  active_pairs_.store(1, std::memory_order_relaxed);
  if (tap_.offloads() == 0) return;
  if (auto r = tap_.set_offloads(0); !r)
    TERN_LOG_RATELIMITED(log_limit(), debug, "{}: reset: {}", name(), r.error().message());
}

uint8_t VirtioNet::set_queue_pairs(uint16_t n) {
  if (n < 1 || n > config_.queue_pairs) return net::VIRTIO_NET_ERR;
  std::lock_guard lock(pairs_mu_);
  return apply_queue_pairs_locked(n) ? net::VIRTIO_NET_OK : net::VIRTIO_NET_ERR;
}

Result<void> VirtioNet::apply_queue_pairs_locked(uint16_t n) {
  Result<void> result;
  // Attach first: the tap always keeps one queue.
  for (uint16_t k = 0; k < tap_.pairs(); ++k) {
    if (k >= n) continue;
    if (auto r = tap_.set_attached(k, true); !r) {
      report_tap_error("TUNSETQUEUE", k, r.error().errnum);
      if (result) result = r;
    }
  }
  for (uint16_t k = n; k < tap_.pairs(); ++k) {
    if (auto r = tap_.set_attached(k, false); !r) {
      report_tap_error("TUNSETQUEUE", k, r.error().errnum);
      if (result) result = r;
    }
  }
  if (result) active_pairs_.store(n, std::memory_order_relaxed);
  return result;
}

void VirtioNet::report_tap_error(const char* op, uint16_t pair, int err) {
  NetCounters::add(counters_.tap_errors);
  const char* why = err == EIO     ? " (the tap is down)"
                    : err == EBADFD ? " (the tap was deleted)"
                                    : "";
  const char* what = err != 0 ? std::strerror(err) : "end of file";
  if (!tap_error_reported_.exchange(true, std::memory_order_relaxed))
    spdlog::warn("{}: tap {}: {} (queue pair {}): {}{}; frames are dropped and counted "
                 "(tap_errors), further errors are logged at debug",
                 name(), tap_.name(), op, pair, what, why);
  else
    TERN_LOG_RATELIMITED(log_limit(), debug, "{}: tap {}: {} (queue pair {}): {}{}", name(),
                         tap_.name(), op, pair, what, why);
}

void VirtioNet::save_device_state(snap::ByteWriter& w) const {
  w.u8(kStateVersion);
  w.u16(active_queue_pairs());
}

Result<void> VirtioNet::restore_device_state(snap::ByteReader& r) {
  const std::string what = std::string(name()) + " device state";
  ASSIGN_OR_RETURN(uint8_t version, r.u8());
  if (version != kStateVersion)
    return fail(what, "version " + std::to_string(version) + " (tern reads " +
                          std::to_string(kStateVersion) + ")");
  ASSIGN_OR_RETURN(uint16_t pairs, r.u16());
  if (pairs < 1 || pairs > config_.queue_pairs)
    return fail(what, "active queue pairs " + std::to_string(pairs) + " not in 1.." +
                          std::to_string(config_.queue_pairs));
  std::lock_guard lock(pairs_mu_);
  restored_pairs_ = pairs;
  return {};
}

void VirtioNet::device_counters(std::vector<std::pair<std::string, uint64_t>>& out) const {
  auto g = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  const NetCounters& c = counters_;
  // What the tap's own statistics say (its tx = frames towards the guest). With vhost=on the
  // data path never enters tern: these, not rx_*/tx_* nor the per-queue counters, count the
  // packets, and the per-queue kicks and interrupts are unknown (vhost-net does not export them).
  auto tap_stat = [&](const char* s) { return tap_.stat(s).value_or(0); };
  const uint64_t tap_tx_dropped = tap_stat("tx_dropped");
  // Frames the kernel dropped because the tap's queue towards tern was full: the guest had no
  // RX buffer for them (since this device was built).
  const uint64_t base = tap_tx_dropped_base_.value_or(0);
  const uint64_t no_buffer = tap_tx_dropped > base ? tap_tx_dropped - base : 0;
  out.insert(out.end(), {{"rx_packets", g(c.rx_packets)},
                         {"rx_bytes", g(c.rx_bytes)},
                         {"rx_dropped_no_buffer", no_buffer},
                         {"rx_no_buffer_waits", g(c.rx_no_buffer_waits)},
                         {"rx_tap_wakeups", g(c.rx_tap_wakeups)},
                         {"rx_dropped_too_big", g(c.rx_dropped_too_big)},
                         {"rx_dropped_runt", g(c.rx_dropped_runt)},
                         {"rx_bad_buffers", g(c.rx_bad_buffers)},
                         {"tx_packets", g(c.tx_packets)},
                         {"tx_bytes", g(c.tx_bytes)},
                         {"tx_dropped_malformed", g(c.tx_dropped_malformed)},
                         {"tx_dropped_tap_error", g(c.tx_dropped_tap_error)},
                         {"tap_errors", g(c.tap_errors)},
                         {"ctrl_commands", g(c.ctrl_commands)},
                         {"ctrl_errors", g(c.ctrl_errors)},
                         {"ctrl_malformed", g(c.ctrl_malformed)},
                         {"active_queue_pairs", active_queue_pairs()},
                         {"vhost_vring_errors", g(c.vhost_vring_errors)},
                         {"vhost_userspace_activations", g(c.vhost_userspace_activations)},
                         {"malformed_chains", sum_queues(&virtio::QueueCounters::malformed)},
                         {"needs_reset", sum_queues(&virtio::QueueCounters::needs_reset)},
                         {"tap_rx_packets", tap_stat("rx_packets")},
                         {"tap_rx_bytes", tap_stat("rx_bytes")},
                         {"tap_rx_dropped", tap_stat("rx_dropped")},
                         {"tap_tx_packets", tap_stat("tx_packets")},
                         {"tap_tx_bytes", tap_stat("tx_bytes")},
                         {"tap_tx_dropped", tap_tx_dropped}});
}

Result<std::shared_ptr<VirtioDevice>> make_virtio_net(const NetConfig& config, std::string name) {
  ASSIGN_OR_RETURN(net::Tap tap, net::Tap::open(config.host_dev_name, config.queue_pairs));
  bool vhost = config.vhost;
  if (vhost) {
    std::string why;
    if (auto ok = net::vhost_net_available(); !ok)
      why = ok.error().message();
    else if (!(net::vhost_net_ring_features() & feature(virtio::VIRTIO_F_VERSION_1)))
      why = "it does not offer VIRTIO_F_VERSION_1";
    if (!why.empty()) {
      spdlog::warn("{}: vhost-net unavailable ({}): serving the queues in userspace", name, why);
      vhost = false;
    }
  }
  ASSIGN_OR_RETURN(auto dev, VirtioNet::create(config, std::move(name), std::move(tap), vhost));
  return std::shared_ptr<VirtioDevice>(std::move(dev));
}

}  // namespace tern
