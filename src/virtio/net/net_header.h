// struct virtio_net_hdr (virtio 1.2 §5.1.6) and what it means to the tap: the TX header checks
// (§5.1.6.2) and the TUNSETOFFLOAD flags for the features the driver acked (§5.1.6.3: the device
// may only hand the driver what it negotiated; Firecracker #4659 offered the tap's full offloads
// and broke guests that did not ack them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace tern::net {

/// VIRTIO_NET_F_* feature bits (§5.1.3).
inline constexpr unsigned VIRTIO_NET_F_CSUM = 0, VIRTIO_NET_F_GUEST_CSUM = 1,
                          VIRTIO_NET_F_CTRL_GUEST_OFFLOADS = 2, VIRTIO_NET_F_MTU = 3,
                          VIRTIO_NET_F_MAC = 5, VIRTIO_NET_F_GUEST_TSO4 = 7,
                          VIRTIO_NET_F_GUEST_TSO6 = 8, VIRTIO_NET_F_GUEST_ECN = 9,
                          VIRTIO_NET_F_GUEST_UFO = 10, VIRTIO_NET_F_HOST_TSO4 = 11,
                          VIRTIO_NET_F_HOST_TSO6 = 12, VIRTIO_NET_F_HOST_ECN = 13,
                          VIRTIO_NET_F_HOST_UFO = 14, VIRTIO_NET_F_MRG_RXBUF = 15,
                          VIRTIO_NET_F_STATUS = 16, VIRTIO_NET_F_CTRL_VQ = 17,
                          VIRTIO_NET_F_CTRL_RX = 18, VIRTIO_NET_F_CTRL_VLAN = 19,
                          VIRTIO_NET_F_GUEST_ANNOUNCE = 21, VIRTIO_NET_F_MQ = 22,
                          VIRTIO_NET_F_CTRL_MAC_ADDR = 23;

/// virtio_net_hdr.flags / gso_type values (§5.1.6).
inline constexpr uint8_t VIRTIO_NET_HDR_F_NEEDS_CSUM = 1, VIRTIO_NET_HDR_F_DATA_VALID = 2;
inline constexpr uint8_t VIRTIO_NET_HDR_GSO_NONE = 0, VIRTIO_NET_HDR_GSO_TCPV4 = 1,
                         VIRTIO_NET_HDR_GSO_UDP = 3, VIRTIO_NET_HDR_GSO_TCPV6 = 4,
                         VIRTIO_NET_HDR_GSO_ECN = 0x80;

/// The header with VIRTIO_F_VERSION_1 (little-endian, num_buffers always present): 12 bytes.
/// This is also the tap's vnet header (TUNSETVNETHDRSZ 12), so frames pass through unchanged.
inline constexpr size_t kNetHdrSize = 12;
/// Ethernet header bytes: a frame shorter than this after the virtio header is malformed.
inline constexpr size_t kEthHdrSize = 14;
/// Largest frame the device moves, virtio header included: 65550 + 12 = the §5.1.6.3.1 "big
/// packet" buffer size (a 64 KiB GSO packet with its Ethernet and VLAN headers).
inline constexpr size_t kMaxFrameSize = 65562;

/// The header's fields, host order.
struct VirtioNetHdr {
  uint8_t flags = 0;
  uint8_t gso_type = 0;
  uint16_t hdr_len = 0;
  uint16_t gso_size = 0;
  uint16_t csum_start = 0;
  uint16_t csum_offset = 0;
  uint16_t num_buffers = 0;
  bool operator==(const VirtioNetHdr&) const = default;
};

/// Decodes the first kNetHdrSize bytes of `bytes` (little-endian); nullopt if shorter.
[[nodiscard]] std::optional<VirtioNetHdr> decode_net_hdr(std::span<const uint8_t> bytes);
/// Encodes `h` into `out` (exactly kNetHdrSize bytes).
void encode_net_hdr(const VirtioNetHdr& h, std::span<uint8_t, kNetHdrSize> out);

/// Why a TX frame is dropped instead of written to the tap.
enum class TxHeaderError {
  kGsoNotNegotiated,   ///< gso_type TCPV4/TCPV6/UDP without the matching HOST_TSO4/TSO6/UFO.
  kEcnNotNegotiated,   ///< GSO_ECN bit without HOST_ECN.
  kBadGsoType,         ///< An unknown gso_type value.
  kGsoSizeZero,        ///< A GSO frame with gso_size 0.
  kCsumNotNegotiated,  ///< NEEDS_CSUM without VIRTIO_NET_F_CSUM.
  kBadCsumOffsets,     ///< csum_start + csum_offset + 2 beyond the frame.
};
[[nodiscard]] std::string_view tx_header_error_name(TxHeaderError e);

/// Checks a TX header against the acked features (§5.1.6.2) for a frame of `frame_len` bytes
/// after the header. nullopt: the frame may go to the tap as it is.
[[nodiscard]] std::optional<TxHeaderError> check_tx_header(const VirtioNetHdr& h, uint64_t acked,
                                                          size_t frame_len);

/// TUN_F_* flags for TUNSETOFFLOAD (linux/if_tun.h) allowed by the acked guest features:
/// GUEST_CSUM → TUN_F_CSUM, GUEST_TSO4 → TUN_F_TSO4, GUEST_TSO6 → TUN_F_TSO6,
/// GUEST_ECN → TUN_F_TSO_ECN, GUEST_UFO → TUN_F_UFO (TSO/ECN/UFO only with GUEST_CSUM, as the
/// kernel requires TUN_F_CSUM for them), masked by `tap_supported` (what the tap accepted).
[[nodiscard]] unsigned tap_offloads_for(uint64_t acked, unsigned tap_supported);

/// Largest frame (virtio header included) the driver must be able to receive with `acked`
/// features and MTU `mtu`: kMaxFrameSize with any GUEST_TSO4/TSO6/UFO, else
/// kNetHdrSize + kEthHdrSize + 4 (VLAN) + mtu, at most kMaxFrameSize.
[[nodiscard]] size_t max_rx_frame(uint64_t acked, uint16_t mtu);

}  // namespace tern::net
