#include "virtio/net/rx_buffers.h"

#include <algorithm>

namespace tern::net {
namespace {

/// readv(2) takes at most UIO_MAXIOV (1024) entries: the guest part gets one less (the scratch
/// tail is the last).
constexpr size_t kMaxReadIov = 1024;
/// Offset of num_buffers in struct virtio_net_hdr (§5.1.6).
constexpr size_t kNumBuffersOffset = 10;

/// Writes `bytes` at byte `offset` of the chain's (writable) buffers, however they are split.
/// The caller made sure the chain is long enough.
void write_chain_bytes(const virtio::DescriptorChain& chain, size_t offset,
                       std::span<const uint8_t> bytes) {
  size_t pos = 0;  // chain offset of the current segment
  size_t done = 0;
  for (const auto& s : chain.segments) {
    if (done == bytes.size()) return;
    const size_t len = s.host.size();
    while (done < bytes.size() && offset + done >= pos && offset + done < pos + len) {
      s.host[offset + done - pos] = bytes[done];
      ++done;
    }
    pos += len;
  }
}

}  // namespace

RxBuffers::RxBuffers(bool mergeable, size_t max_frame)
    : mergeable_(mergeable),
      max_frame_(std::clamp(max_frame, kNetHdrSize + kEthHdrSize, kMaxFrameSize)),
      scratch_(kMaxFrameSize) {}

bool RxBuffers::add(virtio::DescriptorChain chain) {
  for (const auto& s : chain.segments)
    if (!s.writable) return false;
  // §5.1.6.3.1: with MRG_RXBUF each buffer holds at least the header; without it a buffer must
  // take the header and an Ethernet header, or no frame could ever land in it (and, being
  // first, it would block the queue).
  const uint64_t least = mergeable_ ? kNetHdrSize : kNetHdrSize + kEthHdrSize;
  if (chain.writable_bytes < least) return false;
  // No overflow: a chain is at most a queue size (2^15) of 2^32-byte buffers, and at most a
  // queue size of chains is held: 2^62 bytes.
  capacity_ += chain.writable_bytes;
  chains_.push_back(std::move(chain));
  return true;
}

bool RxBuffers::ready(bool ring_full) const {
  if (chains_.empty()) return false;
  if (ring_full) return true;
  const uint64_t usable = mergeable_ ? capacity_ : chains_.front().writable_bytes;
  return usable >= max_frame_;
}

const std::vector<iovec>& RxBuffers::next_read() {
  iov_.clear();
  guest_iov_bytes_ = 0;
  guest_iov_chains_ = 0;
  if (chains_.empty()) return iov_;
  bool full = false;
  for (const auto& c : chains_) {
    if (guest_iov_chains_ > 0 && (!mergeable_ || guest_iov_bytes_ >= max_frame_)) break;
    for (const auto& s : c.segments) {
      if (s.host.empty()) continue;
      if (!iov_.empty() && static_cast<uint8_t*>(iov_.back().iov_base) + iov_.back().iov_len ==
                               s.host.data()) {
        iov_.back().iov_len += s.host.size();  // adjacent in host memory: one entry
      } else if (iov_.size() + 1 < kMaxReadIov) {
        iov_.push_back(iovec{s.host.data(), s.host.size()});
      } else {
        full = true;
        break;
      }
      guest_iov_bytes_ += s.host.size();
    }
    ++guest_iov_chains_;
    if (full) break;
  }
  iov_.push_back(iovec{scratch_.data(), scratch_.size()});
  return iov_;
}

RxResult RxBuffers::complete_read(size_t n) {
  RxResult r;
  r.frame_bytes = n;
  if (n > guest_iov_bytes_ || n > kMaxFrameSize) {
    r.kind = RxResult::Kind::kTooBig;
    return r;
  }
  if (n < kNetHdrSize + kEthHdrSize) {
    r.kind = RxResult::Kind::kRunt;
    return r;
  }
  // Per chain its bytes in next_read()'s iovec: all of it, but the last chain may have been cut
  // by the readv(2) entry limit.
  auto in_iov = [&](size_t i, size_t before) -> size_t {
    return i + 1 == guest_iov_chains_ ? guest_iov_bytes_ - before
                                      : static_cast<size_t>(chains_[i].writable_bytes);
  };
  size_t count = 0;
  for (size_t i = 0, left = n, before = 0; i < guest_iov_chains_ && left > 0; ++i) {
    const size_t b = in_iov(i, before);
    left -= std::min(left, b);
    before += b;
    ++count;
  }
  r.used.reserve(count);
  for (size_t i = 0, left = n, before = 0; i < count; ++i) {
    const size_t b = in_iov(i, before);
    const size_t len = std::min(left, b);
    r.used.push_back(RxUsed{chains_[i].head, static_cast<uint32_t>(len)});
    left -= len;
    before += b;
  }
  // The tap wrote the first 10 header bytes only (it skips num_buffers): set it (§5.1.6.4: 1
  // without MRG_RXBUF, else the number of buffers used). count <= 5465: each buffer takes at
  // least kNetHdrSize bytes and n <= kMaxFrameSize.
  const auto num = static_cast<uint16_t>(count);
  const uint8_t le[2] = {static_cast<uint8_t>(num), static_cast<uint8_t>(num >> 8)};
  write_chain_bytes(chains_.front(), kNumBuffersOffset, le);
  for (size_t i = 0; i < count; ++i) {
    capacity_ -= chains_.front().writable_bytes;
    chains_.pop_front();
  }
  iov_.clear();
  guest_iov_bytes_ = 0;
  guest_iov_chains_ = 0;
  return r;
}

std::vector<uint16_t> RxBuffers::release_all() {
  std::vector<uint16_t> heads;
  heads.reserve(chains_.size());
  for (const auto& c : chains_) heads.push_back(c.head);
  chains_.clear();
  capacity_ = 0;
  iov_.clear();
  guest_iov_bytes_ = 0;
  guest_iov_chains_ = 0;
  return heads;
}

}  // namespace tern::net
