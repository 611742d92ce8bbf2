// VirtioBlock against a hostile guest: every case gets the answer the virtio spec gives it
// (IOERR / UNSUPP / DEVICE_NEEDS_RESET), the image keeps its size and bytes when the request was
// refused, and the device keeps serving well-formed requests. A request tern does not carry out
// never looks carried out: a malformed chain gets VIRTIO_BLK_S_IOERR in its last byte (the status,
// §5.2.6) or, when tern cannot find a status byte, the queue needs a reset.
#include <gtest/gtest.h>

#include <functional>

#include "virtio/block/testing/block_test_fixture.h"
#include "virtio/virtio_spec.h"

namespace tern::testing {
namespace {

using namespace virtio;

constexpr uint64_t kDisk = 64 * 1024;  // 128 sectors

class HostileTest : public BlockDeviceTest {
 protected:
  void SetUp() override {
    BlockDeviceTest::SetUp();
    make_image(kDisk);
  }
  void start_rw() { start(config()); }
  /// A chain the walker refuses: returned with VIRTIO_BLK_S_IOERR in its status byte (the stale
  /// byte a driver reads must not say OK).
  void expect_refused(const std::vector<Buf>& bufs) {
    Done d = submit(bufs);
    EXPECT_EQ(d.used_len, 1u);
    EXPECT_EQ(d.status, VIRTIO_BLK_S_IOERR);
  }
  /// A chain without a status byte tern can find: never returned, DEVICE_NEEDS_RESET. Starts a
  /// fresh device afterwards so the test can go on.
  void expect_needs_reset(const std::function<void()>& post) {
    const uint16_t before = drv().used_idx();
    (void)ram_.mem().write_obj<uint8_t>(kStatusGpa, VIRTIO_BLK_S_OK);  // a stale "OK"
    arm();
    post();
    kick();
    ASSERT_TRUE(irq_->wait_needs_reset());
    EXPECT_EQ(drv().used_idx(), before);
    EXPECT_EQ(ram_.mem().read_obj<uint8_t>(kStatusGpa).value(), VIRTIO_BLK_S_OK);  // untouched
    EXPECT_EQ(dev_->stats().needs_reset, 1u);
    EXPECT_EQ(dev_->stats().malformed_chains, 1u);
    irq_ = std::make_shared<FakeVirtioInterrupt>();
    start_rw();
  }
  void expect_needs_reset(const std::vector<Buf>& bufs) {
    expect_needs_reset([&] { drv().add_chain(bufs); });
  }
};

TEST_F(HostileTest, OutOfRangeSector) {
  start_rw();
  EXPECT_EQ(write_sectors(128, std::vector<uint8_t>(512, 1)).status, VIRTIO_BLK_S_IOERR);
  EXPECT_EQ(write_sectors(127, std::vector<uint8_t>(1024, 1)).status, VIRTIO_BLK_S_IOERR);
  std::vector<uint8_t> out;
  EXPECT_EQ(read_sectors(200, 512, &out).status, VIRTIO_BLK_S_IOERR);
  EXPECT_TRUE(image_unchanged(kDisk));
  EXPECT_EQ(dev_->stats().ioerr, 3u);
  expect_alive();
}

TEST_F(HostileTest, OverflowingSector) {
  start_rw();
  for (uint64_t s : {UINT64_MAX, UINT64_MAX / 512, (UINT64_MAX / 512) + 1, uint64_t{1} << 63}) {
    EXPECT_EQ(write_sectors(s, std::vector<uint8_t>(512, 1)).status, VIRTIO_BLK_S_IOERR) << s;
    std::vector<uint8_t> out;
    EXPECT_EQ(read_sectors(s, 512, &out).status, VIRTIO_BLK_S_IOERR) << s;
    EXPECT_EQ(zero_request(VIRTIO_BLK_T_DISCARD, s, 1, 0).status, VIRTIO_BLK_S_IOERR) << s;
    EXPECT_EQ(zero_request(VIRTIO_BLK_T_WRITE_ZEROES, s, 8, 0).status, VIRTIO_BLK_S_IOERR) << s;
  }
  EXPECT_TRUE(image_unchanged(kDisk));
  expect_alive();
}

TEST_F(HostileTest, PastEndOfDiskNotMultipleOf512) {
  make_image(kDisk + 100);  // capacity 128 sectors; 100-byte tail never exposed
  start_rw();
  EXPECT_EQ(write_sectors(127, std::vector<uint8_t>(1024, 1)).status, VIRTIO_BLK_S_IOERR);
  EXPECT_EQ(write_sectors(128, std::vector<uint8_t>(512, 1)).status, VIRTIO_BLK_S_IOERR);
  EXPECT_EQ(zero_request(VIRTIO_BLK_T_WRITE_ZEROES, 127, 2, 0).status, VIRTIO_BLK_S_IOERR);
  std::vector<uint8_t> out;
  EXPECT_EQ(read_sectors(128, 512, &out).status, VIRTIO_BLK_S_IOERR);
  EXPECT_TRUE(image_unchanged(kDisk + 100));
  EXPECT_EQ(read_sectors(127, 512, &out).status, VIRTIO_BLK_S_OK);  // last full sector is fine
  EXPECT_EQ(out[0], pattern(127 * 512));
}

TEST_F(HostileTest, DataLengthNotMultipleOf512) {
  start_rw();
  EXPECT_EQ(write_sectors(0, std::vector<uint8_t>(100, 1)).status, VIRTIO_BLK_S_IOERR);
  EXPECT_TRUE(image_unchanged(kDisk));
}

TEST_F(HostileTest, WritesAndDiscardsToReadOnlyDisk) {
  auto c = config();
  c.read_only = true;
  start(c);
  EXPECT_TRUE(dev_->device_features() & feature(VIRTIO_BLK_F_RO));
  EXPECT_FALSE(dev_->device_features() & feature(VIRTIO_BLK_F_DISCARD));
  EXPECT_EQ(write_sectors(0, std::vector<uint8_t>(512, 1)).status, VIRTIO_BLK_S_IOERR);
  EXPECT_EQ(zero_request(VIRTIO_BLK_T_DISCARD, 0, 8, 0).status, VIRTIO_BLK_S_IOERR);
  EXPECT_EQ(zero_request(VIRTIO_BLK_T_WRITE_ZEROES, 0, 8, 0).status, VIRTIO_BLK_S_IOERR);
  EXPECT_EQ(request(VIRTIO_BLK_T_FLUSH, 0, 0, false).status, VIRTIO_BLK_S_OK);
  EXPECT_TRUE(image_unchanged(kDisk));
  expect_alive();
}

TEST_F(HostileTest, DescriptorOutsideGuestRam) {
  start_rw();
  put_header(VIRTIO_BLK_T_OUT, 0);
  expect_refused({{kHeaderGpa, 16, false}, {0x40000000, 512, false}, {kStatusGpa, 1, true}});
  put_header(VIRTIO_BLK_T_IN, 0);
  expect_refused({{kHeaderGpa, 16, false}, {0x40000000, 512, true}, {kStatusGpa, 1, true}});
  EXPECT_EQ(dev_->stats().malformed_chains, 2u);
  EXPECT_TRUE(image_unchanged(kDisk));
  expect_alive();
}

TEST_F(HostileTest, DescriptorIntoPciHole) {
  start_rw();
  put_header(VIRTIO_BLK_T_IN, 0);
  expect_refused({{kHeaderGpa, 16, false},
                  {FakeGuestRam::kHoleStart - 256, 512, true},  // straddles RAM and hole
                  {kStatusGpa, 1, true}});
  expect_refused({{kHeaderGpa, 16, false}, {FakeGuestRam::kHoleStart, 512, true}, {kStatusGpa, 1, true}});
  EXPECT_EQ(dev_->stats().malformed_chains, 2u);
  expect_alive();
}

TEST_F(HostileTest, ZeroLengthDescriptors) {
  start_rw();
  // A zero-length data descriptor in the middle is harmless.
  std::vector<uint8_t> data(512, 0x42);
  (void)ram_.mem().write(kDataGpa, data);
  put_header(VIRTIO_BLK_T_OUT, 1);
  Done d = submit({{kHeaderGpa, 16, false}, {kDataGpa, 0, false}, {kDataGpa, 512, false},
                   {kStatusGpa, 1, true}});
  EXPECT_EQ(d.status, VIRTIO_BLK_S_OK);
  EXPECT_EQ(file_bytes()[512], 0x42);
  // A zero-length status descriptor means there is no status byte.
  put_header(VIRTIO_BLK_T_OUT, 2);
  expect_needs_reset({{kHeaderGpa, 16, false}, {kDataGpa, 512, false}, {kStatusGpa, 0, true}});
  EXPECT_EQ(file_bytes()[1024], pattern(1024));
  // A zero-length header descriptor alone: short header -> IOERR.
  d = submit({{kHeaderGpa, 0, false}, {kStatusGpa, 1, true}});
  EXPECT_EQ(d.status, VIRTIO_BLK_S_IOERR);
  expect_alive();
}

TEST_F(HostileTest, WrappingDescriptor) {
  start_rw();
  put_header(VIRTIO_BLK_T_IN, 0);
  expect_refused({{kHeaderGpa, 16, false}, {UINT64_MAX - 100, 512, true}, {kStatusGpa, 1, true}});
  expect_refused({{UINT64_MAX, 16, false}, {kStatusGpa, 1, true}});
  EXPECT_EQ(dev_->stats().malformed_chains, 2u);
  expect_alive();
}

TEST_F(HostileTest, LoopingChain) {
  start_rw();
  put_header(VIRTIO_BLK_T_IN, 0);
  // Descriptors 0 -> 1 -> 0 -> ...: no last descriptor, so no status byte.
  expect_needs_reset([&] {
    drv().write_desc(0, kHeaderGpa, 16, VIRTQ_DESC_F_NEXT, 1);
    drv().write_desc(1, kDataGpa, 512, VIRTQ_DESC_F_NEXT | VIRTQ_DESC_F_WRITE, 0);
    drv().push_avail(0);
  });
  expect_alive();
}

TEST_F(HostileTest, NestedIndirectTable) {
  start_rw();
  put_header(VIRTIO_BLK_T_IN, 0);
  expect_needs_reset([&] {
    (void)ram_.mem().write_obj(0x70000, VirtqDesc{0x71000, 32, VIRTQ_DESC_F_INDIRECT, 0});
    drv().write_indirect_table(0x71000, {{kHeaderGpa, 16, false}, {kStatusGpa, 1, true}});
    drv().write_desc(0, 0x70000, 16, VIRTQ_DESC_F_INDIRECT, 0);
    drv().push_avail(0);
  });
  expect_alive();
}

TEST_F(HostileTest, MalformedIndirectTables) {
  start_rw();
  struct Case {
    uint64_t addr;
    uint32_t len;
    uint16_t flags;
  };
  // The chain's last descriptor is unknown in each: no status byte to answer in.
  for (Case c : {Case{0x70000, 0, VIRTQ_DESC_F_INDIRECT},                      // empty
                 Case{0x70000, 20, VIRTQ_DESC_F_INDIRECT},                     // not 16*n
                 Case{0x70000, 16 * (kMaxIndirectDescriptors + 1), VIRTQ_DESC_F_INDIRECT},
                 Case{FakeGuestRam::kHoleStart, 32, VIRTQ_DESC_F_INDIRECT},    // in the hole
                 Case{0x70000, 32, VIRTQ_DESC_F_INDIRECT | VIRTQ_DESC_F_NEXT}}) {  // with NEXT
    SCOPED_TRACE(c.len);
    expect_needs_reset([&] {
      drv().write_indirect_table(0x70000, {{kHeaderGpa, 16, false}, {kStatusGpa, 1, true}});
      drv().write_desc(5, c.addr, c.len, c.flags, 6);
      drv().write_desc(6, kStatusGpa, 1, VIRTQ_DESC_F_WRITE, 0);
      drv().push_avail(5);
    });
  }
  expect_alive();
}

TEST_F(HostileTest, IndirectTableLongerThanTheRing) {
  // A driver sizes its requests from seg_max, which may not fit the ring it was given (a vhost-user
  // back-end advertises it before the front-end picks the ring): indirect tables up to
  // kMaxIndirectDescriptors are served, as QEMU's device model serves them. Here seg_max data
  // segments after a header split in 4 make a 67-entry table on a 64-entry ring.
  start_rw();
  const uint32_t seg_max = dev_->config_space().seg_max;
  std::vector<uint8_t> data(512ull * seg_max);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7 + 3);
  (void)ram_.mem().write(kDataGpa, data);
  put_header(VIRTIO_BLK_T_OUT, 0);
  std::vector<Buf> table;
  for (uint64_t i = 0; i < 4; ++i) table.push_back({kHeaderGpa + 4 * i, 4, false});
  for (uint32_t i = 0; i < seg_max; ++i) table.push_back({kDataGpa + 512ull * i, 512, false});
  table.push_back({kStatusGpa, 1, true});
  ASSERT_GT(table.size(), kQueueSize);
  (void)ram_.mem().write_obj<uint8_t>(kStatusGpa, 0xff);
  arm();
  drv().add_indirect(0x70000, table);
  kick();
  ASSERT_TRUE(wait_used(1));
  EXPECT_EQ(ram_.mem().read_obj<uint8_t>(kStatusGpa).value(), VIRTIO_BLK_S_OK);
  auto f = file_bytes();
  EXPECT_TRUE(std::equal(data.begin(), data.end(), f.begin()));
  EXPECT_EQ(dev_->stats().malformed_chains, 0u);
  expect_alive();
}

TEST_F(HostileTest, AvailIndexJumpsAheadOfQueueSize) {
  start(config(2));
  drv(0).set_avail_idx(kQueueSize + 5);
  kick(0);
  ASSERT_TRUE(irq_->wait_needs_reset());
  EXPECT_EQ(dev_->stats().needs_reset, 1u);
  EXPECT_EQ(drv(0).used_idx(), 0);
  // The other queue of the same device keeps working.
  expect_alive(1);
  EXPECT_TRUE(image_unchanged(kDisk));
}

TEST_F(HostileTest, HeadIndexOutOfRange) {
  start_rw();
  drv().push_avail(kQueueSize + 1);
  kick();
  ASSERT_TRUE(irq_->wait_needs_reset());
  EXPECT_EQ(drv().used_idx(), 0);
}

TEST_F(HostileTest, HeaderSplitAcrossDescriptors) {
  start_rw();
  put_header(VIRTIO_BLK_T_OUT, 5);
  std::vector<uint8_t> data(512, 0x77);
  (void)ram_.mem().write(kDataGpa, data);
  // 3 + 9 + 4 header bytes, then data split 100 + 412 over two descriptors, status separate.
  Done d = submit({{kHeaderGpa, 3, false}, {kHeaderGpa + 3, 9, false}, {kHeaderGpa + 12, 4, false},
                   {kDataGpa, 100, false}, {kDataGpa + 100, 412, false}, {kStatusGpa, 1, true}});
  EXPECT_EQ(d.status, VIRTIO_BLK_S_OK);
  auto f = file_bytes();
  EXPECT_TRUE(std::equal(data.begin(), data.end(), f.begin() + 5 * 512));
  // Header and data in one descriptor, data and status in one writable descriptor (read).
  std::vector<uint8_t> hdr_and_nothing(16);
  put_header(VIRTIO_BLK_T_IN, 5, kDataGpa + 0x1000);
  (void)ram_.mem().write_obj<uint8_t>(kDataGpa + 0x2000 + 512, 0xff);
  d = submit({{kDataGpa + 0x1000, 16, false}, {kDataGpa + 0x2000, 513, true}},
             kDataGpa + 0x2000 + 512);
  EXPECT_EQ(d.status, VIRTIO_BLK_S_OK);
  EXPECT_EQ(d.used_len, 513u);
  EXPECT_EQ(ram_.at(kDataGpa + 0x2000)[0], 0x77);
}

TEST_F(HostileTest, MissingStatusByte) {
  start_rw();
  put_header(VIRTIO_BLK_T_OUT, 0);
  expect_needs_reset({{kHeaderGpa, 16, false}, {kDataGpa, 512, false}});
  put_header(VIRTIO_BLK_T_FLUSH, 0);
  expect_needs_reset({{kHeaderGpa, 16, false}});
  EXPECT_TRUE(image_unchanged(kDisk));
  expect_alive();
}

TEST_F(HostileTest, ShortHeader) {
  start_rw();
  put_header(VIRTIO_BLK_T_OUT, 0);
  Done d = submit({{kHeaderGpa, 15, false}, {kStatusGpa, 1, true}});
  EXPECT_EQ(d.status, VIRTIO_BLK_S_IOERR);
  EXPECT_TRUE(image_unchanged(kDisk));
}

TEST_F(HostileTest, GetIdWithShortBuffer) {
  start_rw();
  (void)ram_.mem().write(kDataGpa, std::vector<uint8_t>(32, 0xee));
  Done d = request(VIRTIO_BLK_T_GET_ID, 0, 8, true);
  EXPECT_EQ(d.status, VIRTIO_BLK_S_IOERR);
  std::vector<uint8_t> got(32);
  (void)ram_.mem().read(kDataGpa, got);
  EXPECT_EQ(got, std::vector<uint8_t>(32, 0xee));  // nothing written
  expect_alive();
}

TEST_F(HostileTest, UnsupportedRequestTypes) {
  start_rw();
  for (uint32_t t : {2u, 3u, VIRTIO_BLK_T_GET_LIFETIME, VIRTIO_BLK_T_SECURE_ERASE, 0xffffffffu}) {
    Done d = request(t, 0, 512, false);
    EXPECT_EQ(d.status, VIRTIO_BLK_S_UNSUPP) << t;
    EXPECT_EQ(d.used_len, 1u);
  }
  EXPECT_EQ(dev_->stats().unsupp, 5u);
  EXPECT_TRUE(image_unchanged(kDisk));
}

TEST_F(HostileTest, DiscardFlagsAndSegments) {
  start_rw();
  EXPECT_EQ(zero_request(VIRTIO_BLK_T_DISCARD, 0, 8, VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP).status,
            VIRTIO_BLK_S_UNSUPP);
  EXPECT_EQ(zero_request(VIRTIO_BLK_T_WRITE_ZEROES, 0, 8, 0x80).status, VIRTIO_BLK_S_UNSUPP);
  // Segment list not a multiple of 16 bytes.
  put_header(VIRTIO_BLK_T_DISCARD, 0);
  Done d = submit({{kHeaderGpa, 16, false}, {kDataGpa, 10, false}, {kStatusGpa, 1, true}});
  EXPECT_EQ(d.status, VIRTIO_BLK_S_IOERR);
  // More segments than max_discard_seg.
  uint32_t max_seg = dev_->config_space().max_discard_seg;
  std::vector<VirtioBlkDiscardWriteZeroes> segs(max_seg + 1, VirtioBlkDiscardWriteZeroes{0, 1, 0});
  (void)ram_.mem().write(kDataGpa, std::span(reinterpret_cast<const uint8_t*>(segs.data()),
                                             segs.size() * 16));
  d = submit({{kHeaderGpa, 16, false},
              {kDataGpa, static_cast<uint32_t>(segs.size() * 16), false},
              {kStatusGpa, 1, true}});
  EXPECT_EQ(d.status, VIRTIO_BLK_S_IOERR);
  EXPECT_TRUE(image_unchanged(kDisk));
}

TEST_F(HostileTest, UnalignedBuffersWithCacheNone) {
  auto c = config();
  c.cache = CacheMode::kNone;
  start(c);
  ASSERT_TRUE(dev_->disk().direct());
  std::vector<uint8_t> data(2048);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 3 + 1);
  // Odd guest address, and a data area split at a non-block boundary.
  uint64_t odd = kDataGpa + 3;
  (void)ram_.mem().write(odd, data);
  put_header(VIRTIO_BLK_T_OUT, 4);
  Done d = submit({{kHeaderGpa, 16, false}, {odd, 700, false}, {odd + 700, 1348, false},
                   {kStatusGpa, 1, true}});
  EXPECT_EQ(d.status, VIRTIO_BLK_S_OK);
  auto f = file_bytes();
  EXPECT_TRUE(std::equal(data.begin(), data.end(), f.begin() + 4 * 512));
  std::vector<uint8_t> back;
  d = read_sectors(4, 2048, &back, kDataGpa + 0x8001);
  EXPECT_EQ(d.status, VIRTIO_BLK_S_OK);
  EXPECT_EQ(back, data);
  EXPECT_EQ(dev_->stats().bounced, 2u);
  EXPECT_EQ(f.size(), kDisk);
}

TEST_F(HostileTest, ReusedHeadWhileInFlightDoesNotCrash) {
  start_rw();
  // The same head made available many times in one batch (a buggy driver): each entry is served.
  put_header(VIRTIO_BLK_T_IN, 0);
  drv().write_desc(0, kHeaderGpa, 16, VIRTQ_DESC_F_NEXT, 1);
  drv().write_desc(1, kDataGpa, 512, VIRTQ_DESC_F_NEXT | VIRTQ_DESC_F_WRITE, 2);
  drv().write_desc(2, kStatusGpa, 1, VIRTQ_DESC_F_WRITE, 0);
  arm();
  for (int i = 0; i < kQueueSize; ++i) drv().push_avail(0);
  kick();
  ASSERT_TRUE(wait_used(kQueueSize));
  EXPECT_EQ(dev_->stats().reads, static_cast<uint64_t>(kQueueSize));
}

}  // namespace
}  // namespace tern::testing
