#include "virtio/net/net_header.h"

#include <linux/if_tun.h>

#include <algorithm>

#include "virtio/virtio_spec.h"

namespace tern::net {
namespace {

bool acked_bit(uint64_t acked, unsigned bit) { return (acked & virtio::feature(bit)) != 0; }

uint16_t load_le16(std::span<const uint8_t> b, size_t at) {
  return static_cast<uint16_t>(b[at] | (b[at + 1] << 8));
}

void store_le16(std::span<uint8_t, kNetHdrSize> b, size_t at, uint16_t v) {
  b[at] = static_cast<uint8_t>(v);
  b[at + 1] = static_cast<uint8_t>(v >> 8);
}

}  // namespace

std::optional<VirtioNetHdr> decode_net_hdr(std::span<const uint8_t> bytes) {
  if (bytes.size() < kNetHdrSize) return std::nullopt;
  VirtioNetHdr h;
  h.flags = bytes[0];
  h.gso_type = bytes[1];
  h.hdr_len = load_le16(bytes, 2);
  h.gso_size = load_le16(bytes, 4);
  h.csum_start = load_le16(bytes, 6);
  h.csum_offset = load_le16(bytes, 8);
  h.num_buffers = load_le16(bytes, 10);
  return h;
}

void encode_net_hdr(const VirtioNetHdr& h, std::span<uint8_t, kNetHdrSize> out) {
  out[0] = h.flags;
  out[1] = h.gso_type;
  store_le16(out, 2, h.hdr_len);
  store_le16(out, 4, h.gso_size);
  store_le16(out, 6, h.csum_start);
  store_le16(out, 8, h.csum_offset);
  store_le16(out, 10, h.num_buffers);
}

std::string_view tx_header_error_name(TxHeaderError e) {
  switch (e) {
    case TxHeaderError::kGsoNotNegotiated: return "GSO type not negotiated";
    case TxHeaderError::kEcnNotNegotiated: return "GSO ECN not negotiated";
    case TxHeaderError::kBadGsoType: return "unknown GSO type";
    case TxHeaderError::kGsoSizeZero: return "GSO frame with gso_size 0";
    case TxHeaderError::kCsumNotNegotiated: return "NEEDS_CSUM without VIRTIO_NET_F_CSUM";
    case TxHeaderError::kBadCsumOffsets: return "csum_start + csum_offset beyond the frame";
  }
  return "unknown TX header error";
}

std::optional<TxHeaderError> check_tx_header(const VirtioNetHdr& h, uint64_t acked,
                                             size_t frame_len) {
  // §5.1.6.2: gso_type is NONE, or one of TCPV4/TCPV6/UDP (with the matching HOST_* feature),
  // optionally with the ECN bit (HOST_ECN). ECN on GSO_NONE is no GSO type at all (the kernel's
  // virtio_net_hdr_to_skb refuses it too).
  if (h.gso_type != VIRTIO_NET_HDR_GSO_NONE) {
    const uint8_t type = h.gso_type & static_cast<uint8_t>(~VIRTIO_NET_HDR_GSO_ECN);
    unsigned needed = 0;
    switch (type) {
      case VIRTIO_NET_HDR_GSO_TCPV4: needed = VIRTIO_NET_F_HOST_TSO4; break;
      case VIRTIO_NET_HDR_GSO_TCPV6: needed = VIRTIO_NET_F_HOST_TSO6; break;
      case VIRTIO_NET_HDR_GSO_UDP: needed = VIRTIO_NET_F_HOST_UFO; break;
      default: return TxHeaderError::kBadGsoType;
    }
    if (!acked_bit(acked, needed)) return TxHeaderError::kGsoNotNegotiated;
    if ((h.gso_type & VIRTIO_NET_HDR_GSO_ECN) && !acked_bit(acked, VIRTIO_NET_F_HOST_ECN))
      return TxHeaderError::kEcnNotNegotiated;
    if (h.gso_size == 0) return TxHeaderError::kGsoSizeZero;
  }
  if (h.flags & VIRTIO_NET_HDR_F_NEEDS_CSUM) {
    if (!acked_bit(acked, VIRTIO_NET_F_CSUM)) return TxHeaderError::kCsumNotNegotiated;
    // The checksum (2 bytes) is stored at csum_start + csum_offset: it must lie in the frame.
    const uint64_t end = uint64_t{h.csum_start} + h.csum_offset + 2;
    if (end > frame_len) return TxHeaderError::kBadCsumOffsets;
  }
  return std::nullopt;
}

unsigned tap_offloads_for(uint64_t acked, unsigned tap_supported) {
  // The kernel's set_offload() (drivers/net/tun.c) takes TSO/ECN/UFO only together with
  // TUN_F_CSUM, and TSO_ECN only together with TSO4 or TSO6; anything else is EINVAL.
  if (!acked_bit(acked, VIRTIO_NET_F_GUEST_CSUM) || !(tap_supported & TUN_F_CSUM)) return 0;
  unsigned f = TUN_F_CSUM;
  if (acked_bit(acked, VIRTIO_NET_F_GUEST_TSO4)) f |= TUN_F_TSO4;
  if (acked_bit(acked, VIRTIO_NET_F_GUEST_TSO6)) f |= TUN_F_TSO6;
  if (acked_bit(acked, VIRTIO_NET_F_GUEST_ECN)) f |= TUN_F_TSO_ECN;
  if (acked_bit(acked, VIRTIO_NET_F_GUEST_UFO)) f |= TUN_F_UFO;
  f &= tap_supported;
  if (!(f & (TUN_F_TSO4 | TUN_F_TSO6))) f &= ~static_cast<unsigned>(TUN_F_TSO_ECN);
  return f;
}

size_t max_rx_frame(uint64_t acked, uint16_t mtu) {
  if (acked_bit(acked, VIRTIO_NET_F_GUEST_TSO4) || acked_bit(acked, VIRTIO_NET_F_GUEST_TSO6) ||
      acked_bit(acked, VIRTIO_NET_F_GUEST_UFO))
    return kMaxFrameSize;
  return std::min(kNetHdrSize + kEthHdrSize + 4 + size_t{mtu}, kMaxFrameSize);
}

}  // namespace tern::net
