#include "virtio/net/tx_frame.h"

#include <gtest/gtest.h>

#include <array>
#include <cstring>

#include "virtio/testing/fake_virtqueue_driver.h"
#include "virtio/virtio_spec.h"

namespace tern::net {
namespace {

using testing::FakeGuestRam;
using testing::FakeVirtqueueDriver;
using virtio::feature;
using Buf = FakeVirtqueueDriver::Buf;

constexpr uint16_t kSize = 64;

class NetTxFrame : public ::testing::Test {
 protected:
  FakeGuestRam ram;
  FakeVirtqueueDriver drv{ram.mem(), 0x1000, kSize};
  /// The validated chain of `bufs`, as the TX queue pops it.
  virtio::DescriptorChain chain(const std::vector<Buf>& bufs) {
    const uint16_t head = drv.add_chain(bufs);
    return virtio::walk_descriptor_chain(ram.mem(), drv.config().desc_gpa, kSize, head, true)
        .value();
  }
  void put_hdr(uint64_t gpa, const VirtioNetHdr& h) {
    std::array<uint8_t, kNetHdrSize> b{};
    encode_net_hdr(h, b);
    std::memcpy(ram.at(gpa), b.data(), b.size());
  }
  static TxChainError error(const tl::expected<TxFrame, TxDrop>& r) { return r.error().error; }
  TxHeaderBytes hb{};  ///< Where parse() keeps the checked header.
  /// parse_tx_chain() with the fixture's header storage.
  tl::expected<TxFrame, TxDrop> parse(const virtio::DescriptorChain& c, uint64_t acked,
                                      std::vector<iovec>&& iov = {}) {
    return parse_tx_chain(c, acked, hb, std::move(iov));
  }
  /// The bytes writev(2) would send for `iov`, gathered now.
  static std::vector<uint8_t> gather(const std::vector<iovec>& iov) {
    std::vector<uint8_t> out;
    for (const iovec& v : iov) {
      const auto* p = static_cast<const uint8_t*>(v.iov_base);
      out.insert(out.end(), p, p + v.iov_len);
    }
    return out;
  }
};

TEST_F(NetTxFrame, FiveByteChainHasNoHeader) {
  auto r = parse(chain({{0x10000, 5, false}}), 0);
  ASSERT_FALSE(r);
  EXPECT_EQ(error(r), TxChainError::kNoHeader);
}

TEST_F(NetTxFrame, HeaderOnlyIsARunt) {
  EXPECT_EQ(error(parse(chain({{0x10000, kNetHdrSize, false}}), 0)), TxChainError::kRunt);
  EXPECT_EQ(error(parse(chain({{0x10000, kNetHdrSize + kEthHdrSize - 1, false}}), 0)),
            TxChainError::kRunt);
  EXPECT_TRUE(parse(chain({{0x10000, kNetHdrSize + kEthHdrSize, false}}), 0));
}

TEST_F(NetTxFrame, SeventyKilobytesIsTooLong) {
  EXPECT_EQ(error(parse(chain({{0x10000, 70000, false}}), 0)), TxChainError::kTooLong);
  EXPECT_EQ(error(parse(chain({{0x10000, 40000, false}, {0x30000, 30000, false}}), 0)),
            TxChainError::kTooLong);
  EXPECT_TRUE(parse(chain({{0x10000, kMaxFrameSize, false}}), 0));
}

TEST_F(NetTxFrame, WritableSegmentIsRefused) {
  auto r = parse(chain({{0x10000, 100, false}, {0x20000, 16, true}}), 0);
  ASSERT_FALSE(r);
  EXPECT_EQ(error(r), TxChainError::kWritable);
  EXPECT_EQ(error(parse(chain({{0x20000, 100, true}}), 0)), TxChainError::kWritable);
}

TEST_F(NetTxFrame, HeaderSplitOverDescriptors) {
  VirtioNetHdr h;
  h.flags = VIRTIO_NET_HDR_F_NEEDS_CSUM;
  h.csum_start = 34;
  h.csum_offset = 16;
  h.hdr_len = 0x0201;
  std::array<uint8_t, kNetHdrSize> b{};
  encode_net_hdr(h, b);
  // 5 + 0 + 4 + 3 header bytes in four descriptors, then the frame.
  std::memcpy(ram.at(0x10000), b.data(), 5);
  std::memcpy(ram.at(0x11000), b.data() + 5, 4);
  std::memcpy(ram.at(0x12000), b.data() + 9, 3);
  auto c = chain({{0x10000, 5, false},
                  {0x10800, 0, false},
                  {0x11000, 4, false},
                  {0x12000, 3, false},
                  {0x13000, 60, false}});
  auto r = parse(c, feature(VIRTIO_NET_F_CSUM));
  ASSERT_TRUE(r) << tx_chain_error_name(error(r));
  EXPECT_EQ(r->hdr, h);
  EXPECT_EQ(r->bytes, kNetHdrSize + 60);
  ASSERT_EQ(r->iov.size(), 2u);  // the header's copy, then the frame
  EXPECT_EQ(r->iov[0].iov_base, hb.data());
  EXPECT_EQ(r->iov[0].iov_len, kNetHdrSize);
  EXPECT_EQ(r->iov[1].iov_base, ram.at(0x13000));
  // Without CSUM acked the same header is refused.
  auto bad = parse(c, 0);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().error, TxChainError::kBadHeader);
  EXPECT_EQ(bad.error().header, TxHeaderError::kCsumNotNegotiated);
}

/// A TCPv4 GSO header with a checksum offload (needs CSUM and HOST_TSO4).
VirtioNetHdr tso4_header() {
  VirtioNetHdr h;
  h.flags = VIRTIO_NET_HDR_F_NEEDS_CSUM;
  h.gso_type = VIRTIO_NET_HDR_GSO_TCPV4;
  h.gso_size = 1448;
  h.csum_start = 34;
  h.csum_offset = 16;
  return h;
}

TEST_F(NetTxFrame, GsoWithoutHostTso4) {
  put_hdr(0x10000, tso4_header());
  auto c = chain({{0x10000, kNetHdrSize + 3000, false}});
  auto r = parse(c, feature(VIRTIO_NET_F_CSUM));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().error, TxChainError::kBadHeader);
  EXPECT_EQ(r.error().header, TxHeaderError::kGsoNotNegotiated);
  EXPECT_TRUE(parse(c, feature(VIRTIO_NET_F_CSUM) | feature(VIRTIO_NET_F_HOST_TSO4)).has_value());
}

TEST_F(NetTxFrame, GoodFramePointsAtGuestMemory) {
  put_hdr(0x10000, VirtioNetHdr{});
  for (int i = 0; i < 100; ++i) ram.at(0x20000)[i] = static_cast<uint8_t>(i);
  // Header + 20 bytes in one buffer, 30 more right after it (adjacent: one entry), 50 elsewhere.
  auto c = chain({{0x10000, kNetHdrSize + 20, false},
                  {0x10000 + kNetHdrSize + 20, 30, false},
                  {0x20000, 50, false}});
  std::vector<iovec> storage;
  storage.reserve(8);
  const iovec* kept = storage.data();
  auto r = parse(c, 0, std::move(storage));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->bytes, kNetHdrSize + 100);
  ASSERT_EQ(r->iov.size(), 3u);
  EXPECT_EQ(r->iov.data(), kept);  // the caller's storage, no new allocation
  EXPECT_EQ(r->iov[0].iov_base, hb.data());  // the checked copy of the header
  EXPECT_EQ(r->iov[0].iov_len, kNetHdrSize);
  EXPECT_EQ(r->iov[1].iov_base, ram.at(0x10000 + kNetHdrSize));  // the frame: guest memory
  EXPECT_EQ(r->iov[1].iov_len, 50u);
  EXPECT_EQ(r->iov[2].iov_base, ram.at(0x20000));
  EXPECT_EQ(r->iov[2].iov_len, 50u);
  EXPECT_EQ(static_cast<uint8_t*>(r->iov[2].iov_base)[49], 49);
  // Reused: the next parse clears what the last one left.
  auto again = parse(c, 0, std::move(r->iov));
  ASSERT_TRUE(again);
  EXPECT_EQ(again->iov.size(), 3u);
  EXPECT_EQ(again->iov.data(), kept);
}

// Issue 31 item 4: the header is checked from a copy; another vCPU rewriting the guest's header
// after the check (here: a GSO/checksum header the driver never negotiated) must not reach the
// tap. The bytes the iovec sends are the checked ones, the frame still comes from guest memory.
TEST_F(NetTxFrame, HeaderRewrittenAfterTheCheckIsNotSent) {
  put_hdr(0x10000, VirtioNetHdr{});
  for (int i = 0; i < 60; ++i) ram.at(0x10000 + kNetHdrSize)[i] = static_cast<uint8_t>(i + 1);
  auto c = chain({{0x10000, kNetHdrSize + 60, false}});
  auto r = parse(c, 0);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->iov[0].iov_base, hb.data());  // tern's copy, not guest memory
  std::array<uint8_t, kNetHdrSize> checked{};
  encode_net_hdr(VirtioNetHdr{}, checked);
  // The second vCPU, between the check and writev(2): offloads the driver never negotiated.
  put_hdr(0x10000, tso4_header());
  ram.at(0x10000 + kNetHdrSize)[0] = 0xEE;  // the frame itself is the guest's to change
  const std::vector<uint8_t> sent = gather(r->iov);
  ASSERT_EQ(sent.size(), kNetHdrSize + 60);
  EXPECT_TRUE(std::equal(checked.begin(), checked.end(), sent.begin()))
      << "writev would send the guest's rewritten header";
  EXPECT_EQ(sent[kNetHdrSize], 0xEE);
  EXPECT_EQ(sent[kNetHdrSize + 59], 60);
  EXPECT_EQ(r->hdr, VirtioNetHdr{});
}

TEST_F(NetTxFrame, ErrorNames) {
  for (auto e : {TxChainError::kNoHeader, TxChainError::kRunt, TxChainError::kTooLong,
                 TxChainError::kWritable, TxChainError::kBadHeader})
    EXPECT_FALSE(tx_chain_error_name(e).empty());
}

}  // namespace
}  // namespace tern::net
