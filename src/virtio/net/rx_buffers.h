// RxBuffers: the receiveq buffers one RX queue holds — chains taken from the available ring and
// not yet returned — and how a packet read from the tap lands in them (virtio 1.2 §5.1.6.3,
// §5.1.6.4): straight into guest memory with one readv(2), the virtio header's num_buffers set to
// the number of buffers used (VIRTIO_NET_F_MRG_RXBUF), or into exactly one buffer without it.
// A scratch tail after the guest buffers catches a frame too large for them, which is dropped
// (counted by the caller) with the buffers kept for the next frame.
//
// Bounded: at most one queue size of chains (the available ring's), plus one kMaxFrameSize
// scratch buffer per queue.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <deque>
#include <vector>

#include "virtio/descriptor_chain.h"
#include "virtio/net/net_header.h"

namespace tern::net {

/// One used-ring element to write for a received frame.
struct RxUsed {
  uint16_t head = 0;
  uint32_t len = 0;  ///< Bytes written into this buffer (the header counts in the first).
};

/// What became of one frame read into the iovec of next_read().
struct RxResult {
  enum class Kind {
    kDelivered,  ///< `used` holds the buffers to return, in order (num_buffers = used.size()).
    kTooBig,     ///< The frame overflowed into the scratch tail: dropped, buffers kept.
    kRunt,       ///< Fewer than kNetHdrSize + kEthHdrSize bytes read: dropped, buffers kept.
  } kind = Kind::kDelivered;
  std::vector<RxUsed> used;
  size_t frame_bytes = 0;  ///< Bytes read (header included).
};

/// See the file comment. One per RX queue, used by its worker thread only.
class RxBuffers {
 public:
  /// `mergeable`: VIRTIO_NET_F_MRG_RXBUF acked. `max_frame`: max_rx_frame() of the acked
  /// features (header included).
  RxBuffers(bool mergeable, size_t max_frame);

  /// Takes a chain from the available ring. A chain with device-readable buffers, or fewer
  /// device-writable bytes than kNetHdrSize (MRG_RXBUF, §5.1.6.3.1) or kNetHdrSize + kEthHdrSize
  /// (without it: no frame fits, and being first it would block the queue), cannot hold a frame:
  /// returns false and the caller returns it with used length 0 (counted as a bad RX buffer).
  [[nodiscard]] bool add(virtio::DescriptorChain chain);
  /// Chains held.
  [[nodiscard]] size_t held() const { return chains_.size(); }
  /// Writable bytes held.
  [[nodiscard]] uint64_t capacity() const { return capacity_; }
  /// True when the buffers held are sure to take any frame up to max_frame: with MRG_RXBUF
  /// their total, without it the first chain's size. When false the caller waits for more
  /// buffers (a kick) instead of reading the tap, unless `ring_full` (every entry of the ring is
  /// held: more will never come, so it reads and drops what does not fit).
  [[nodiscard]] bool ready(bool ring_full) const;

  /// The iovec for the next readv(2) on the tap: the guest buffers a frame may use (MRG_RXBUF:
  /// the first chains up to max_frame bytes; else the first chain), then the scratch tail.
  /// Valid until the next call of any other member. Empty if nothing is held.
  [[nodiscard]] const std::vector<iovec>& next_read();
  /// Accounts a readv(2) of `n` bytes into next_read()'s iovec: sets num_buffers in the header
  /// (wherever the header's bytes are in the first chain), removes the used chains, and says
  /// what to return to the used ring. kTooBig when `n` is beyond the guest part (or beyond
  /// kMaxFrameSize), kRunt below kNetHdrSize + kEthHdrSize. The guest part of next_read() is
  /// capped at 1023 entries (readv's UIO_MAXIOV with the scratch tail).
  [[nodiscard]] RxResult complete_read(size_t n);
  /// Removes every held chain and returns their heads, newest last (for QueueWorker::unpop, or
  /// completing them with length 0 when that is refused).
  [[nodiscard]] std::vector<uint16_t> release_all();

 private:
  bool mergeable_;
  size_t max_frame_;
  std::deque<virtio::DescriptorChain> chains_;
  uint64_t capacity_ = 0;
  std::vector<iovec> iov_;
  std::vector<uint8_t> scratch_;
  size_t guest_iov_bytes_ = 0;  // bytes of next_read()'s guest part
  size_t guest_iov_chains_ = 0; // chains spanned by next_read()'s guest part
};

}  // namespace tern::net
