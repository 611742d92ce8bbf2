#include "virtio/net/net_header.h"

#include <gtest/gtest.h>
#include <linux/if_tun.h>

#include <array>

#include "virtio/virtio_spec.h"

namespace tern::net {
namespace {

using virtio::feature;

constexpr unsigned kAllTun = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN | TUN_F_UFO;

TEST(NetHeader, EncodeDecodeLittleEndian) {
  const VirtioNetHdr h{VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_TCPV4, 0x0102, 0x0304,
                       0x0506, 0x0708, 0x090a};
  std::array<uint8_t, kNetHdrSize> b{};
  encode_net_hdr(h, b);
  const std::array<uint8_t, kNetHdrSize> want{1, 1, 0x02, 0x01, 0x04, 0x03,
                                              0x06, 0x05, 0x08, 0x07, 0x0a, 0x09};
  EXPECT_EQ(b, want);
  EXPECT_EQ(decode_net_hdr(b), h);
}

TEST(NetHeader, DecodeNeedsTwelveBytesAndIgnoresTheRest) {
  std::array<uint8_t, 20> b{};
  b[10] = 3;
  b[12] = 0xff;
  EXPECT_FALSE(decode_net_hdr(std::span(b).first(kNetHdrSize - 1)));
  auto h = decode_net_hdr(b);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->num_buffers, 3);
  EXPECT_EQ(h->flags, 0);
}

VirtioNetHdr gso(uint8_t type, uint16_t size = 1448) {
  VirtioNetHdr h;
  h.flags = VIRTIO_NET_HDR_F_NEEDS_CSUM;
  h.gso_type = type;
  h.gso_size = size;
  h.csum_start = 34;
  h.csum_offset = 16;
  return h;
}

TEST(NetHeader, PlainFrameNeedsNothing) {
  EXPECT_EQ(check_tx_header(VirtioNetHdr{}, 0, 14), std::nullopt);
  VirtioNetHdr valid;  // DATA_VALID is ignored on TX (§5.1.6.2: the device ignores it)
  valid.flags = VIRTIO_NET_HDR_F_DATA_VALID;
  EXPECT_EQ(check_tx_header(valid, 0, 60), std::nullopt);
}

TEST(NetHeader, GsoNeedsTheMatchingHostFeature) {
  const uint64_t csum = feature(VIRTIO_NET_F_CSUM);
  EXPECT_EQ(check_tx_header(gso(VIRTIO_NET_HDR_GSO_TCPV4), csum, 1514),
            TxHeaderError::kGsoNotNegotiated);
  EXPECT_EQ(check_tx_header(gso(VIRTIO_NET_HDR_GSO_TCPV6), csum | feature(VIRTIO_NET_F_HOST_TSO4),
                            1514),
            TxHeaderError::kGsoNotNegotiated);
  EXPECT_EQ(check_tx_header(gso(VIRTIO_NET_HDR_GSO_UDP), csum | feature(VIRTIO_NET_F_HOST_TSO4),
                            1514),
            TxHeaderError::kGsoNotNegotiated);
  EXPECT_EQ(check_tx_header(gso(VIRTIO_NET_HDR_GSO_TCPV4), csum | feature(VIRTIO_NET_F_HOST_TSO4),
                            1514),
            std::nullopt);
  EXPECT_EQ(check_tx_header(gso(VIRTIO_NET_HDR_GSO_TCPV6), csum | feature(VIRTIO_NET_F_HOST_TSO6),
                            1514),
            std::nullopt);
  EXPECT_EQ(check_tx_header(gso(VIRTIO_NET_HDR_GSO_UDP), csum | feature(VIRTIO_NET_F_HOST_UFO),
                            1514),
            std::nullopt);
}

TEST(NetHeader, EcnNeedsHostEcn) {
  const uint64_t tso = feature(VIRTIO_NET_F_CSUM) | feature(VIRTIO_NET_F_HOST_TSO4);
  const auto h = gso(VIRTIO_NET_HDR_GSO_TCPV4 | VIRTIO_NET_HDR_GSO_ECN);
  EXPECT_EQ(check_tx_header(h, tso, 1514), TxHeaderError::kEcnNotNegotiated);
  EXPECT_EQ(check_tx_header(h, tso | feature(VIRTIO_NET_F_HOST_ECN), 1514), std::nullopt);
}

TEST(NetHeader, UnknownGsoTypes) {
  const uint64_t all = ~uint64_t{0};
  EXPECT_EQ(check_tx_header(gso(2), all, 1514), TxHeaderError::kBadGsoType);
  EXPECT_EQ(check_tx_header(gso(5), all, 1514), TxHeaderError::kBadGsoType);  // UDP_L4: no USO
  EXPECT_EQ(check_tx_header(gso(VIRTIO_NET_HDR_GSO_ECN), all, 1514), TxHeaderError::kBadGsoType);
}

TEST(NetHeader, GsoSizeZero) {
  EXPECT_EQ(check_tx_header(gso(VIRTIO_NET_HDR_GSO_TCPV4, 0), ~uint64_t{0}, 1514),
            TxHeaderError::kGsoSizeZero);
}

TEST(NetHeader, NeedsCsumWithoutCsum) {
  VirtioNetHdr h;
  h.flags = VIRTIO_NET_HDR_F_NEEDS_CSUM;
  h.csum_start = 34;
  h.csum_offset = 6;
  EXPECT_EQ(check_tx_header(h, feature(VIRTIO_NET_F_GUEST_CSUM), 60),
            TxHeaderError::kCsumNotNegotiated);
  EXPECT_EQ(check_tx_header(h, feature(VIRTIO_NET_F_CSUM), 60), std::nullopt);
}

TEST(NetHeader, CsumOffsetsMustLieInTheFrame) {
  const uint64_t csum = feature(VIRTIO_NET_F_CSUM);
  VirtioNetHdr h;
  h.flags = VIRTIO_NET_HDR_F_NEEDS_CSUM;
  h.csum_start = 34;
  h.csum_offset = 16;
  EXPECT_EQ(check_tx_header(h, csum, 52), std::nullopt);  // checksum at [50, 52)
  EXPECT_EQ(check_tx_header(h, csum, 51), TxHeaderError::kBadCsumOffsets);
  h.csum_start = 0xffff;
  h.csum_offset = 0xffff;  // no 16-bit wrap
  EXPECT_EQ(check_tx_header(h, csum, 65535), TxHeaderError::kBadCsumOffsets);
  EXPECT_EQ(check_tx_header(h, csum, 0x1ffff + 1), std::nullopt);
}

TEST(NetHeader, ErrorNames) {
  for (auto e : {TxHeaderError::kGsoNotNegotiated, TxHeaderError::kEcnNotNegotiated,
                 TxHeaderError::kBadGsoType, TxHeaderError::kGsoSizeZero,
                 TxHeaderError::kCsumNotNegotiated, TxHeaderError::kBadCsumOffsets})
    EXPECT_FALSE(tx_header_error_name(e).empty());
}

TEST(NetHeader, TapOffloadsFollowTheAckedGuestFeatures) {
  EXPECT_EQ(tap_offloads_for(0, kAllTun), 0u);
  // Host (TX) features never turn on tap offloads: those are what the tap may hand the guest.
  EXPECT_EQ(tap_offloads_for(feature(VIRTIO_NET_F_CSUM) | feature(VIRTIO_NET_F_HOST_TSO4), kAllTun),
            0u);
  EXPECT_EQ(tap_offloads_for(feature(VIRTIO_NET_F_GUEST_CSUM), kAllTun),
            unsigned{TUN_F_CSUM});
  const uint64_t all = feature(VIRTIO_NET_F_GUEST_CSUM) | feature(VIRTIO_NET_F_GUEST_TSO4) |
                       feature(VIRTIO_NET_F_GUEST_TSO6) | feature(VIRTIO_NET_F_GUEST_ECN) |
                       feature(VIRTIO_NET_F_GUEST_UFO);
  EXPECT_EQ(tap_offloads_for(all, kAllTun), kAllTun);
  EXPECT_EQ(tap_offloads_for(all & ~feature(VIRTIO_NET_F_GUEST_UFO), kAllTun),
            kAllTun & ~unsigned{TUN_F_UFO});
}

TEST(NetHeader, TapOffloadsAreMaskedByTheTap) {
  const uint64_t all = feature(VIRTIO_NET_F_GUEST_CSUM) | feature(VIRTIO_NET_F_GUEST_TSO4) |
                       feature(VIRTIO_NET_F_GUEST_TSO6) | feature(VIRTIO_NET_F_GUEST_ECN) |
                       feature(VIRTIO_NET_F_GUEST_UFO);
  EXPECT_EQ(tap_offloads_for(all, TUN_F_CSUM | TUN_F_TSO4), unsigned{TUN_F_CSUM | TUN_F_TSO4});
  // TSO_ECN alone is EINVAL for the kernel: it needs TSO4 or TSO6 beside it.
  EXPECT_EQ(tap_offloads_for(all, TUN_F_CSUM | TUN_F_TSO_ECN | TUN_F_UFO),
            unsigned{TUN_F_CSUM | TUN_F_UFO});
  EXPECT_EQ(tap_offloads_for(feature(VIRTIO_NET_F_GUEST_CSUM) | feature(VIRTIO_NET_F_GUEST_ECN),
                             kAllTun),
            unsigned{TUN_F_CSUM});
}

TEST(NetHeader, TapOffloadsNeedCsum) {
  // TSO/ECN/UFO acked without GUEST_CSUM, or a tap without TUN_F_CSUM: nothing at all.
  const uint64_t no_csum = feature(VIRTIO_NET_F_GUEST_TSO4) | feature(VIRTIO_NET_F_GUEST_TSO6) |
                           feature(VIRTIO_NET_F_GUEST_ECN) | feature(VIRTIO_NET_F_GUEST_UFO);
  EXPECT_EQ(tap_offloads_for(no_csum, kAllTun), 0u);
  EXPECT_EQ(tap_offloads_for(no_csum | feature(VIRTIO_NET_F_GUEST_CSUM),
                             kAllTun & ~unsigned{TUN_F_CSUM}),
            0u);
}

TEST(NetHeader, MaxRxFrame) {
  EXPECT_EQ(max_rx_frame(0, 1500), 12u + 14 + 4 + 1500);
  EXPECT_EQ(max_rx_frame(feature(VIRTIO_NET_F_GUEST_CSUM) | feature(VIRTIO_NET_F_HOST_TSO4), 9000),
            12u + 14 + 4 + 9000);
  EXPECT_EQ(max_rx_frame(feature(VIRTIO_NET_F_GUEST_TSO4), 1500), kMaxFrameSize);
  EXPECT_EQ(max_rx_frame(feature(VIRTIO_NET_F_GUEST_TSO6), 68), kMaxFrameSize);
  EXPECT_EQ(max_rx_frame(feature(VIRTIO_NET_F_GUEST_UFO), 1500), kMaxFrameSize);
  EXPECT_EQ(max_rx_frame(0, 65535), kMaxFrameSize);
}

}  // namespace
}  // namespace tern::net
