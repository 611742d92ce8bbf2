// VirtioNet: the virtio network device (virtio 1.2 §5.1) over a tap (tap.h), on
// VirtioDeviceBase. Queues (§5.1.2): receiveq k = 2k and transmitq k = 2k + 1 for the N queue
// pairs, then the controlq: index 2N when VIRTIO_NET_F_MQ is negotiated, else 2. Pair k uses the
// tap's fd k: RX frames are read from it straight into the guest's buffers (net::RxBuffers, one
// readv each), TX chains are written to it with one writev (net::parse_tx_chain). The tap's vnet
// header is the virtio-net header (12 bytes), so frames pass unchanged.
//
// Features: VERSION_1, MAC (with a guest_mac), STATUS (link always up), MTU (with an mtu), CSUM,
// GUEST_CSUM, GUEST/HOST TSO4/TSO6/ECN/UFO where the tap accepts the TUN_F_* flag, MRG_RXBUF,
// CTRL_VQ, MQ (N > 1), EVENT_IDX, INDIRECT_DESC. At activation the tap's offloads are set from the
// acked features only (§5.1.6.3; Firecracker #4659), and one queue pair is active (§5.1.6.5.5)
// until the driver sends VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET.
//
// vhost=on: RX/TX are handed to /dev/vhost-net (net::start_vhost_net) and only features vhost
// serves are offered; tern keeps the control queue, the configuration space and the snapshot
// state. If /dev/vhost-net cannot be used, one warning and the queues are served here; a driver
// that did not negotiate MRG_RXBUF is served here too (vhost_serves()).
//
// Device state (snapshots): the active queue pairs. The config space derives from NetConfig and
// the offloads from the acked features, which the transport restores.
//
// Thread-safety: as VirtioDeviceBase. Queue handlers run on their workers; the control queue's
// worker changes the active pairs under pairs_mu_; counters are relaxed atomics.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "base/result.h"
#include "virtio/net/net_config.h"
#include "virtio/net/tap.h"
#include "virtio/virtio_device_base.h"

namespace tern {

namespace net {

/// struct virtio_net_config (§5.1.4) fields tern provides: mac, status, max_virtqueue_pairs, mtu.
inline constexpr size_t kNetConfigSize = 12;
inline constexpr uint16_t VIRTIO_NET_S_LINK_UP = 1;
/// Control queue (§5.1.6.5): class/command and the ack values.
inline constexpr uint8_t VIRTIO_NET_OK = 0, VIRTIO_NET_ERR = 1;
inline constexpr uint8_t VIRTIO_NET_CTRL_MQ = 4, VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET = 0;

/// The device's live counters (relaxed atomics; any thread).
struct NetCounters {
  std::atomic<uint64_t> rx_packets{0}, rx_bytes{0};  ///< Frames delivered; bytes without header.
  std::atomic<uint64_t> rx_no_buffer_waits{0};  ///< Times the tap was readable with no (big
                                                ///< enough) RX buffer: reading stopped until a kick.
  std::atomic<uint64_t> rx_tap_wakeups{0};      ///< Worker wakeups for a readable tap fd.
  std::atomic<uint64_t> rx_dropped_too_big{0};  ///< Frames larger than the buffers (ring full).
  std::atomic<uint64_t> rx_dropped_runt{0};     ///< Reads shorter than header + Ethernet header.
  std::atomic<uint64_t> rx_bad_buffers{0};      ///< RX chains that cannot hold a frame (len 0).
  std::atomic<uint64_t> tx_packets{0}, tx_bytes{0};  ///< Frames written; bytes without header.
  std::atomic<uint64_t> tx_dropped_malformed{0};     ///< Chains parse_tx_chain() refused.
  std::atomic<uint64_t> tx_dropped_tap_error{0};     ///< Frames writev(2) refused (EIO: tap down).
  std::atomic<uint64_t> tap_errors{0};               ///< Any tap syscall failure (not EAGAIN).
  std::atomic<uint64_t> ctrl_commands{0}, ctrl_errors{0};  ///< Commands; those answered ERR.
  std::atomic<uint64_t> ctrl_malformed{0};  ///< Commands without class/command or ack byte.
  std::atomic<uint64_t> vhost_vring_errors{0};  ///< vhost-net error eventfd signals (a vring
                                                ///< refused a malformed chain: NEEDS_RESET).
  std::atomic<uint64_t> vhost_userspace_activations{0};  ///< vhost=on activations served in
                                                         ///< userspace (no MRG_RXBUF).
  static void add(std::atomic<uint64_t>& c, uint64_t n = 1) {
    c.fetch_add(n, std::memory_order_relaxed);
  }
};

}  // namespace net

/// See the file comment.
class VirtioNet final : public virtio::VirtioDeviceBase {
 public:
  static constexpr uint16_t kQueueSize = 256;  ///< max_queue_size() of every queue.

  /// Builds the device over `tap` (tap.pairs() == config.queue_pairs). `vhost`: serve RX/TX
  /// with /dev/vhost-net (the caller checked net::vhost_net_available()).
  [[nodiscard]] static Result<std::shared_ptr<VirtioNet>> create(const NetConfig& config,
                                                                std::string name, net::Tap tap,
                                                                bool vhost);
  ~VirtioNet() override;

  /// §5.1.3.1 dependencies: GUEST_TSO4/TSO6/UFO need GUEST_CSUM, GUEST_ECN needs GUEST_TSO4 or
  /// GUEST_TSO6, HOST_TSO4/TSO6/UFO need CSUM, HOST_ECN needs HOST_TSO4 or HOST_TSO6, MQ needs
  /// CTRL_VQ. The error names the features.
  [[nodiscard]] Result<void> check_features(uint64_t acked) const override;
  /// struct virtio_net_config (§5.1.4), kNetConfigSize bytes, little-endian; beyond: zeros.
  void read_config(uint64_t offset, std::span<uint8_t> data) override;
  /// The configuration space is read-only for the driver: writes are ignored.
  void write_config(uint64_t, std::span<const uint8_t>) override {}
  /// u8 version (1), u16 active queue pairs.
  void save_device_state(snap::ByteWriter& w) const override;
  /// Validates (version, 1 ≤ pairs ≤ N); the pairs apply at the next activate().
  [[nodiscard]] Result<void> restore_device_state(snap::ByteReader& r) override;

  /// Queue pairs the driver uses now (1 after activation, VQ_PAIRS_SET changes it).
  [[nodiscard]] uint16_t active_queue_pairs() const {
    return active_pairs_.load(std::memory_order_relaxed);
  }
  /// True when the device was built with vhost-net (vhost=on and /dev/vhost-net usable).
  [[nodiscard]] bool vhost() const { return vhost_; }
  /// Whether vhost-net may serve RX/TX for a driver that acked `acked`: only with
  /// VIRTIO_NET_F_MRG_RXBUF. Without it the kernel's vhost-net (drivers/vhost/net.c handle_rx)
  /// leaves the RX header's num_buffers as the tap left it (unwritten), where virtio 1.2
  /// §5.1.6.4 says the device MUST set it to 1; tern's userspace path writes it.
  [[nodiscard]] static bool vhost_serves(uint64_t acked);
  [[nodiscard]] const NetConfig& config() const { return config_; }
  [[nodiscard]] const net::Tap& tap() const { return tap_; }

  // ---- for the queue handlers (net_rx.cc, net_tx.cc, net_ctrl.cc) ----

  [[nodiscard]] net::NetCounters& live_counters() { return counters_; }
  [[nodiscard]] const net::NetCounters& live_counters() const { return counters_; }
  /// MTU the driver is told (config mtu, else 1500).
  [[nodiscard]] uint16_t mtu() const { return config_.mtu.value_or(1500); }
  /// VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET (§5.1.6.5.5): pairs [0, n) attached to the tap, the rest
  /// detached. Returns VIRTIO_NET_OK, or VIRTIO_NET_ERR for n outside 1..N or a tap error.
  uint8_t set_queue_pairs(uint16_t n);
  /// Counts a failed tap syscall (`op` on pair `pair`, errno `err`, 0 for an end of file): the
  /// first is logged at warn, the rest rate-limited at debug.
  void report_tap_error(const char* op, uint16_t pair, int err);

 protected:
  [[nodiscard]] Result<std::unique_ptr<virtio::QueueHandler>> make_queue_handler(
      uint16_t index, const VirtqueueConfig& queue, uint64_t acked) override;
  /// TUNSETOFFLOAD(tap_offloads_for(acked)) on every fd; pair 0 (or the restored pairs) active.
  [[nodiscard]] Result<void> on_activate(uint64_t acked) override;
  /// Offloads back to 0 (the next driver may not ack them); one active pair.
  void on_reset() override;
  [[nodiscard]] bool external_queue(uint16_t index, uint64_t acked) const override;
  [[nodiscard]] Result<std::unique_ptr<virtio::ExternalQueues>> start_external(
      const GuestMemory& mem, uint64_t acked, std::vector<virtio::ExternalQueue> queues,
      std::shared_ptr<VirtioInterrupt> interrupt) override;
  /// See virtio_net.cc (counter names and what each means).
  void device_counters(std::vector<std::pair<std::string, uint64_t>>& out) const override;

 private:
  VirtioNet(const NetConfig& config, std::string name, net::Tap tap, bool vhost,
            uint64_t features);
  /// What queue `index` is with `acked`: a pair's RX/TX, the controlq, or unused.
  enum class QueueRole { kRx, kTx, kCtrl, kUnused };
  [[nodiscard]] QueueRole role(uint16_t index, uint64_t acked) const;
  /// pairs_mu_ held: attaches [0, n), detaches the rest; errors are counted and returned.
  Result<void> apply_queue_pairs_locked(uint16_t n);

  const NetConfig config_;
  net::Tap tap_;
  const bool vhost_;
  net::NetCounters counters_;
  std::atomic<bool> tap_error_reported_{false};
  std::atomic<bool> vhost_fallback_logged_{false};
  std::optional<uint64_t> tap_tx_dropped_base_;  // the tap's tx_dropped when built
  std::mutex pairs_mu_;                          // tap attach state, active_pairs_ changes
  std::atomic<uint16_t> active_pairs_{1};
  std::optional<uint16_t> restored_pairs_;  // restore_device_state → next on_activate
};

}  // namespace tern
