#include "virtio/net/rx_buffers.h"

#include <gtest/gtest.h>

#include <cstring>

#include "virtio/testing/fake_virtqueue_driver.h"

namespace tern::net {
namespace {

using testing::FakeGuestRam;
using testing::FakeVirtqueueDriver;
using Buf = FakeVirtqueueDriver::Buf;
using Kind = RxResult::Kind;

constexpr uint16_t kSize = 2048;

class NetRxBuffers : public ::testing::Test {
 protected:
  FakeGuestRam ram;
  FakeVirtqueueDriver drv{ram.mem(), 0x1000, kSize};
  /// The validated chain of `bufs`, as the RX queue pops it (the buffers are filled with 0xee).
  virtio::DescriptorChain chain(const std::vector<Buf>& bufs) {
    for (const auto& b : bufs) std::memset(ram.at(b.gpa), 0xee, b.len);
    const uint16_t head = drv.add_chain(bufs);
    return virtio::walk_descriptor_chain(ram.mem(), drv.config().desc_gpa, kSize, head, true)
        .value();
  }
  uint16_t add(RxBuffers& rx, const std::vector<Buf>& bufs) {
    auto c = chain(bufs);
    const uint16_t head = c.head;
    EXPECT_TRUE(rx.add(std::move(c)));
    return head;
  }
  /// What the tap does: readv() of `n` bytes, the first 10 header bytes written and num_buffers
  /// skipped (TUNSETVNETHDRSZ 12), then the frame.
  static void tap_read(const std::vector<iovec>& iov, size_t n) {
    size_t pos = 0;
    for (const auto& v : iov) {
      for (size_t i = 0; i < v.iov_len && pos < n; ++i, ++pos)
        if (pos < 10 || pos >= kNetHdrSize) static_cast<uint8_t*>(v.iov_base)[i] = 0x11;
    }
  }
  static size_t total(const std::vector<iovec>& iov) {
    size_t t = 0;
    for (const auto& v : iov) t += v.iov_len;
    return t;
  }
};

TEST_F(NetRxBuffers, MergeableFrameSpansChainsAndSetsNumBuffersInASplitHeader) {
  RxBuffers rx(true, 250);
  // The first chain splits the header 4 + 7 + 1: num_buffers' low byte ends the second buffer,
  // its high byte is the third one.
  const uint16_t a = add(rx, {{0x10000, 4, true}, {0x11000, 7, true}, {0x12000, 1, true},
                              {0x13000, 88, true}});
  const uint16_t b = add(rx, {{0x20000, 100, true}});
  const uint16_t c = add(rx, {{0x30000, 100, true}});
  const uint16_t d = add(rx, {{0x40000, 100, true}});
  EXPECT_EQ(rx.held(), 4u);
  EXPECT_EQ(rx.capacity(), 400u);
  const auto& iov = rx.next_read();
  // Chains a, b, c cover max_frame (300 >= 250); d is not offered; then the scratch tail.
  ASSERT_EQ(iov.size(), 4u + 1 + 1 + 1);
  EXPECT_EQ(iov[0].iov_base, ram.at(0x10000));
  EXPECT_EQ(iov.back().iov_len, kMaxFrameSize);
  EXPECT_EQ(total(iov) - kMaxFrameSize, 300u);
  tap_read(iov, 250);
  auto r = rx.complete_read(250);
  ASSERT_EQ(r.kind, Kind::kDelivered);
  EXPECT_EQ(r.frame_bytes, 250u);
  ASSERT_EQ(r.used.size(), 3u);
  EXPECT_EQ(r.used[0].head, a);
  EXPECT_EQ(r.used[0].len, 100u);
  EXPECT_EQ(r.used[1].head, b);
  EXPECT_EQ(r.used[1].len, 100u);
  EXPECT_EQ(r.used[2].head, c);
  EXPECT_EQ(r.used[2].len, 50u);
  EXPECT_EQ(*ram.at(0x11000 + 6), 3);  // num_buffers = 3, little-endian
  EXPECT_EQ(*ram.at(0x12000), 0);
  EXPECT_EQ(*ram.at(0x11000 + 5), 0x11);  // the tap's bytes are left alone
  EXPECT_EQ(rx.held(), 1u);
  EXPECT_EQ(rx.capacity(), 100u);
  // The next frame starts in d.
  const auto& next = rx.next_read();
  EXPECT_EQ(next[0].iov_base, ram.at(0x40000));
  auto r2 = rx.complete_read(60);
  ASSERT_EQ(r2.kind, Kind::kDelivered);
  ASSERT_EQ(r2.used.size(), 1u);
  EXPECT_EQ(r2.used[0].head, d);
  EXPECT_EQ(r2.used[0].len, 60u);
  EXPECT_EQ(*ram.at(0x40000 + 10), 1);
  EXPECT_EQ(rx.held(), 0u);
  EXPECT_TRUE(rx.next_read().empty());
}

TEST_F(NetRxBuffers, MergeableSmallFrameUsesOneChain) {
  RxBuffers rx(true, 1530);
  const uint16_t a = add(rx, {{0x10000, 1000, true}});
  add(rx, {{0x20000, 1000, true}});
  tap_read(rx.next_read(), 1000);
  auto r = rx.complete_read(1000);
  ASSERT_EQ(r.kind, Kind::kDelivered);
  ASSERT_EQ(r.used.size(), 1u);
  EXPECT_EQ(r.used[0].head, a);
  EXPECT_EQ(r.used[0].len, 1000u);
  EXPECT_EQ(*ram.at(0x10000 + 10), 1);
  EXPECT_EQ(rx.held(), 1u);
}

TEST_F(NetRxBuffers, WithoutMergeableOneChainTakesTheFrame) {
  RxBuffers rx(false, 1530);
  const uint16_t a = add(rx, {{0x10000, 1000, true}, {0x11000, 600, true}});
  add(rx, {{0x20000, 1600, true}});
  const auto& iov = rx.next_read();
  ASSERT_EQ(iov.size(), 3u);  // the first chain only, then the scratch tail
  EXPECT_EQ(iov[1].iov_base, ram.at(0x11000));
  tap_read(iov, 1200);
  auto r = rx.complete_read(1200);
  ASSERT_EQ(r.kind, Kind::kDelivered);
  ASSERT_EQ(r.used.size(), 1u);
  EXPECT_EQ(r.used[0].head, a);
  EXPECT_EQ(r.used[0].len, 1200u);
  EXPECT_EQ(*ram.at(0x10000 + 10), 1);  // num_buffers is 1 without MRG_RXBUF too
  EXPECT_EQ(*ram.at(0x10000 + 11), 0);
  EXPECT_EQ(rx.held(), 1u);
  EXPECT_EQ(rx.capacity(), 1600u);
}

TEST_F(NetRxBuffers, TooBigKeepsTheBuffers) {
  RxBuffers rx(false, 1530);
  const uint16_t a = add(rx, {{0x10000, 100, true}});
  const auto& iov = rx.next_read();
  EXPECT_EQ(total(iov), 100u + kMaxFrameSize);
  auto r = rx.complete_read(101);  // one byte went to the scratch tail
  EXPECT_EQ(r.kind, Kind::kTooBig);
  EXPECT_TRUE(r.used.empty());
  EXPECT_EQ(r.frame_bytes, 101u);
  EXPECT_EQ(rx.held(), 1u);
  EXPECT_EQ(rx.capacity(), 100u);
  // The same buffer takes the next frame that fits.
  (void)rx.next_read();
  auto ok = rx.complete_read(100);
  ASSERT_EQ(ok.kind, Kind::kDelivered);
  ASSERT_EQ(ok.used.size(), 1u);
  EXPECT_EQ(ok.used[0].head, a);

  RxBuffers mrg(true, 1530);
  add(mrg, {{0x20000, 100, true}});
  add(mrg, {{0x30000, 100, true}});
  (void)mrg.next_read();
  EXPECT_EQ(mrg.complete_read(201).kind, Kind::kTooBig);
  EXPECT_EQ(mrg.held(), 2u);
  EXPECT_EQ(mrg.capacity(), 200u);
}

TEST_F(NetRxBuffers, RuntKeepsTheBuffers) {
  RxBuffers rx(true, 1530);
  add(rx, {{0x10000, 1600, true}});
  (void)rx.next_read();
  auto r = rx.complete_read(kNetHdrSize + kEthHdrSize - 1);
  EXPECT_EQ(r.kind, Kind::kRunt);
  EXPECT_TRUE(r.used.empty());
  EXPECT_EQ(rx.held(), 1u);
  EXPECT_EQ(rx.complete_read(0).kind, Kind::kRunt);
  EXPECT_EQ(rx.complete_read(kNetHdrSize + kEthHdrSize).kind, Kind::kDelivered);
}

TEST_F(NetRxBuffers, ReadyWithAndWithoutRingFull) {
  RxBuffers mrg(true, 1530);
  EXPECT_FALSE(mrg.ready(false));
  EXPECT_FALSE(mrg.ready(true));  // nothing held: nothing to read into
  add(mrg, {{0x10000, 1000, true}});
  EXPECT_FALSE(mrg.ready(false));
  EXPECT_TRUE(mrg.ready(true));
  add(mrg, {{0x20000, 530, true}});
  EXPECT_TRUE(mrg.ready(false));  // 1530 bytes in total

  RxBuffers one(false, 1530);
  add(one, {{0x30000, 1000, true}});
  add(one, {{0x40000, 4000, true}});
  EXPECT_FALSE(one.ready(false));  // only the first chain counts
  EXPECT_TRUE(one.ready(true));
  RxBuffers big(false, 1530);
  add(big, {{0x50000, 1530, true}});
  EXPECT_TRUE(big.ready(false));
}

TEST_F(NetRxBuffers, RefusesChainsThatCannotHoldAFrame) {
  RxBuffers mrg(true, 1530);
  EXPECT_FALSE(mrg.add(chain({{0x10000, 100, false}, {0x11000, 100, true}})));  // readable
  EXPECT_FALSE(mrg.add(chain({{0x10000, 0, true}})));
  EXPECT_FALSE(mrg.add(chain({{0x10000, kNetHdrSize - 1, true}})));
  EXPECT_TRUE(mrg.add(chain({{0x10000, kNetHdrSize, true}})));
  RxBuffers one(false, 1530);
  EXPECT_FALSE(one.add(chain({{0x10000, kNetHdrSize + kEthHdrSize - 1, true}})));
  EXPECT_TRUE(one.add(chain({{0x10000, kNetHdrSize + kEthHdrSize, true}})));
  EXPECT_EQ(mrg.held() + one.held(), 2u);
}

TEST_F(NetRxBuffers, ReleaseAllInOrder) {
  RxBuffers rx(true, 1530);
  const uint16_t a = add(rx, {{0x10000, 100, true}});
  const uint16_t b = add(rx, {{0x20000, 100, true}, {0x21000, 100, true}});
  const uint16_t c = add(rx, {{0x30000, 100, true}});
  (void)rx.next_read();
  EXPECT_EQ(rx.release_all(), (std::vector<uint16_t>{a, b, c}));
  EXPECT_EQ(rx.held(), 0u);
  EXPECT_EQ(rx.capacity(), 0u);
  EXPECT_TRUE(rx.next_read().empty());
  EXPECT_EQ(rx.complete_read(100).kind, Kind::kTooBig);  // nothing to land in
  EXPECT_TRUE(rx.release_all().empty());
}

TEST_F(NetRxBuffers, ReadvEntryLimit) {
  // 1100 two-byte buffers, none adjacent: readv(2) takes 1024 entries, so the guest part stops
  // at 1023 of them (2046 bytes) and the scratch tail is the last.
  std::vector<Buf> bufs;
  for (uint64_t i = 0; i < 1100; ++i) bufs.push_back({0x10000 + 4 * i, 2, true});
  RxBuffers rx(false, 1530);
  const uint16_t a = add(rx, bufs);
  const auto& iov = rx.next_read();
  ASSERT_EQ(iov.size(), 1024u);
  EXPECT_EQ(total(iov), 2046u + kMaxFrameSize);
  EXPECT_EQ(rx.complete_read(2047).kind, Kind::kTooBig);
  auto r = rx.complete_read(2046);
  ASSERT_EQ(r.kind, Kind::kDelivered);
  ASSERT_EQ(r.used.size(), 1u);
  EXPECT_EQ(r.used[0].head, a);
  EXPECT_EQ(r.used[0].len, 2046u);
  EXPECT_EQ(*ram.at(0x10000 + 4 * 5), 1);  // header byte 10 is the 6th buffer's first byte
  EXPECT_EQ(*ram.at(0x10000 + 4 * 5 + 1), 0);
}

TEST_F(NetRxBuffers, AdjacentBuffersShareAnEntry) {
  RxBuffers rx(true, 1530);
  add(rx, {{0x10000, 600, true}, {0x10000 + 600, 600, true}});
  add(rx, {{0x10000 + 1200, 600, true}});
  const auto& iov = rx.next_read();
  ASSERT_EQ(iov.size(), 2u);
  EXPECT_EQ(iov[0].iov_len, 1800u);
  auto r = rx.complete_read(1500);
  ASSERT_EQ(r.used.size(), 2u);
  EXPECT_EQ(r.used[0].len, 1200u);
  EXPECT_EQ(r.used[1].len, 300u);
  EXPECT_EQ(*ram.at(0x10000 + 10), 2);
}

}  // namespace
}  // namespace tern::net
