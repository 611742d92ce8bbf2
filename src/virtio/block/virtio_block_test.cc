// VirtioBlock: requests that should work, config space, cache modes, engines, user-input errors.
#include "virtio/block/virtio_block.h"

#include <sys/stat.h>

#include <gtest/gtest.h>

#include "virtio/block/testing/block_test_fixture.h"
#include "virtio/virtio_spec.h"

namespace tern::testing {
namespace {

using namespace virtio;

constexpr uint64_t kDisk = 64 * 1024;

std::vector<uint8_t> bytes(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 13);
  return v;
}

TEST_F(BlockDeviceTest, WriteThenReadIoUring) {
  make_image(kDisk);
  start(config());
  auto data = bytes(4096, 1);
  Done w = write_sectors(8, data);
  EXPECT_EQ(w.status, VIRTIO_BLK_S_OK);
  EXPECT_EQ(w.used_len, 1u);
  auto file = file_bytes();
  ASSERT_EQ(file.size(), kDisk);
  EXPECT_TRUE(std::equal(data.begin(), data.end(), file.begin() + 8 * 512));
  std::vector<uint8_t> back;
  Done r = read_sectors(8, 4096, &back, kDataGpa + 0x10000);
  EXPECT_EQ(r.status, VIRTIO_BLK_S_OK);
  EXPECT_EQ(r.used_len, 4097u);
  EXPECT_EQ(back, data);
  EXPECT_EQ(dev_->engine(), IoEngineKind::kIoUring);
  auto s = dev_->stats();
  EXPECT_EQ(s.writes, 1u);
  EXPECT_EQ(s.reads, 1u);
  EXPECT_EQ(s.bytes_written, 4096u);
}

TEST_F(BlockDeviceTest, WriteThenReadThreadPool) {
  make_image(kDisk);
  auto c = config();
  c.engine = IoEngineKind::kThreads;
  start(c);
  EXPECT_EQ(dev_->engine(), IoEngineKind::kThreads);
  auto data = bytes(1024, 9);
  EXPECT_EQ(write_sectors(3, data).status, VIRTIO_BLK_S_OK);
  std::vector<uint8_t> back;
  EXPECT_EQ(read_sectors(3, 1024, &back, kDataGpa + 0x8000).status, VIRTIO_BLK_S_OK);
  EXPECT_EQ(back, data);
  auto file = file_bytes();
  EXPECT_TRUE(std::equal(data.begin(), data.end(), file.begin() + 3 * 512));
}

TEST_F(BlockDeviceTest, ScatterGatherAcrossRegionsAndIndirect) {
  make_image(kDisk);
  start(config());
  // Data split over the low and the high region, through an indirect table.
  auto data = bytes(1536, 3);
  (void)ram_.mem().write(kDataGpa, std::span(data).subspan(0, 512));
  (void)ram_.mem().write(FakeGuestRam::kHighGpa + 0x100, std::span(data).subspan(512));
  put_header(VIRTIO_BLK_T_OUT, 20);
  (void)ram_.mem().write_obj<uint8_t>(kStatusGpa, 0xff);
  drv().add_indirect(0x70000, {{kHeaderGpa, 16, false},
                               {kDataGpa, 512, false},
                               {FakeGuestRam::kHighGpa + 0x100, 1024, false},
                               {kStatusGpa, 1, true}});
  arm();
  kick();
  ASSERT_TRUE(wait_used(1));
  EXPECT_EQ(ram_.mem().read_obj<uint8_t>(kStatusGpa).value(), VIRTIO_BLK_S_OK);
  auto file = file_bytes();
  EXPECT_TRUE(std::equal(data.begin(), data.end(), file.begin() + 20 * 512));
}

TEST_F(BlockDeviceTest, ManyRequestsInOneBatch) {
  make_image(kDisk);
  start(config());
  // 20 one-sector writes (60 of the 64 descriptors) made available before a single kick.
  arm();
  for (uint16_t i = 0; i < 20; ++i) {
    uint64_t h = 0x40000 + i * 32, st = 0x48000 + i, d = 0xA0000 + i * 512;
    put_header(VIRTIO_BLK_T_OUT, i, h);
    std::vector<uint8_t> sec(512, static_cast<uint8_t>(i + 1));
    (void)ram_.mem().write(d, sec);
    drv().add_chain({{h, 16, false}, {d, 512, false}, {st, 1, true}});
  }
  kick();
  ASSERT_TRUE(wait_used(20));
  auto file = file_bytes();
  for (uint16_t i = 0; i < 20; ++i) {
    EXPECT_EQ(ram_.mem().read_obj<uint8_t>(0x48000 + i).value(), VIRTIO_BLK_S_OK);
    EXPECT_EQ(file[i * 512 + 100], i + 1);
  }
  EXPECT_EQ(dev_->stats().writes, 20u);
}

TEST_F(BlockDeviceTest, FlushWriteback) {
  make_image(kDisk);
  start(config());
  EXPECT_EQ(request(VIRTIO_BLK_T_FLUSH, 0, 0, false).status, VIRTIO_BLK_S_OK);
  EXPECT_EQ(dev_->stats().flushes, 1u);
}

TEST_F(BlockDeviceTest, FlushUnsafeCompletesWithoutSync) {
  make_image(kDisk);
  auto c = config();
  c.cache = CacheMode::kUnsafe;
  start(c);
  EXPECT_EQ(request(VIRTIO_BLK_T_FLUSH, 0, 0, false).status, VIRTIO_BLK_S_OK);
  EXPECT_EQ(dev_->stats().flushes, 1u);
}

TEST_F(BlockDeviceTest, CacheNoneAlignedAndDirectSync) {
  make_image(kDisk);
  for (CacheMode m : {CacheMode::kNone, CacheMode::kDirectSync}) {
    auto c = config();
    c.cache = m;
    start(c);
    EXPECT_TRUE(dev_->disk().direct());
    auto data = bytes(4096, static_cast<uint8_t>(m));
    EXPECT_EQ(write_sectors(16, data).status, VIRTIO_BLK_S_OK);
    std::vector<uint8_t> back;
    EXPECT_EQ(read_sectors(16, 4096, &back, kDataGpa + 0x10000).status, VIRTIO_BLK_S_OK);
    EXPECT_EQ(back, data);
    EXPECT_EQ(request(VIRTIO_BLK_T_FLUSH, 0, 0, false).status, VIRTIO_BLK_S_OK);
    EXPECT_EQ(dev_->stats().bounced, 0u);
    dev_->reset();
  }
}

TEST_F(BlockDeviceTest, GetId) {
  make_image(kDisk);
  start(config());
  (void)ram_.mem().write(kDataGpa, std::vector<uint8_t>(32, 0xee));
  Done g = request(VIRTIO_BLK_T_GET_ID, 0, 32, true);
  EXPECT_EQ(g.status, VIRTIO_BLK_S_OK);
  EXPECT_EQ(g.used_len, 21u);
  std::vector<uint8_t> got(32);
  (void)ram_.mem().read(kDataGpa, got);
  std::string serial = "tern-serial-0001";
  EXPECT_EQ(std::string(got.begin(), got.begin() + 16), serial);
  for (int i = 16; i < 20; ++i) EXPECT_EQ(got[i], 0);
  for (int i = 20; i < 32; ++i) EXPECT_EQ(got[i], 0xee);  // nothing past 20 bytes
}

TEST_F(BlockDeviceTest, DiscardAndWriteZeroesReadBackZero) {
  make_image(kDisk);
  start(config());
  EXPECT_EQ(zero_request(VIRTIO_BLK_T_DISCARD, 8, 16, 0).status, VIRTIO_BLK_S_OK);
  EXPECT_EQ(zero_request(VIRTIO_BLK_T_WRITE_ZEROES, 40, 3, 0).status, VIRTIO_BLK_S_OK);
  EXPECT_EQ(zero_request(VIRTIO_BLK_T_WRITE_ZEROES, 60, 2, VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP)
                .status,
            VIRTIO_BLK_S_OK);
  auto file = file_bytes();
  ASSERT_EQ(file.size(), kDisk);  // KEEP_SIZE
  for (uint64_t i = 0; i < kDisk; ++i) {
    bool zeroed = (i >= 8 * 512 && i < 24 * 512) || (i >= 40 * 512 && i < 43 * 512) ||
                  (i >= 60 * 512 && i < 62 * 512);
    ASSERT_EQ(file[i], zeroed ? 0 : pattern(i)) << "byte " << i;
  }
  EXPECT_EQ(dev_->stats().discards, 1u);
  EXPECT_EQ(dev_->stats().write_zeroes, 2u);
}

TEST_F(BlockDeviceTest, FeaturesAndConfigSpace) {
  make_image(kDisk + 100);
  start(config(2));
  uint64_t f = dev_->device_features();
  for (unsigned b : {VIRTIO_F_VERSION_1, VIRTIO_F_INDIRECT_DESC, VIRTIO_F_EVENT_IDX,
                     VIRTIO_BLK_F_SIZE_MAX, VIRTIO_BLK_F_SEG_MAX, VIRTIO_BLK_F_BLK_SIZE,
                     VIRTIO_BLK_F_FLUSH, VIRTIO_BLK_F_DISCARD, VIRTIO_BLK_F_WRITE_ZEROES,
                     VIRTIO_BLK_F_MQ})
    EXPECT_TRUE(f & feature(b)) << b;
  EXPECT_FALSE(f & feature(VIRTIO_BLK_F_RO));
  EXPECT_EQ(dev_->device_type(), 2u);
  EXPECT_EQ(dev_->num_queues(), 2);
  EXPECT_EQ(dev_->max_queue_size(), kQueueSize);
  uint8_t cap[8];
  dev_->read_config(0, cap);
  uint64_t capacity;
  std::memcpy(&capacity, cap, 8);
  EXPECT_EQ(capacity, kDisk / 512);  // the 100-byte tail is not exposed
  uint8_t nq[2];
  dev_->read_config(34, nq);
  EXPECT_EQ(nq[0] | nq[1] << 8, 2);
  uint8_t blk[4];
  dev_->read_config(20, blk);
  EXPECT_EQ(blk[0] | blk[1] << 8, 512);
  uint8_t past[4] = {1, 2, 3, 4};
  dev_->read_config(200, past);
  EXPECT_EQ(past[0] | past[1] | past[2] | past[3], 0);
  dev_->write_config(0, std::vector<uint8_t>(8, 0));  // ignored
  dev_->read_config(0, cap);
  std::memcpy(&capacity, cap, 8);
  EXPECT_EQ(capacity, kDisk / 512);
  expect_alive(0);
  expect_alive(1);
}

TEST_F(BlockDeviceTest, ResetAndReactivate) {
  make_image(kDisk);
  start(config());
  expect_alive();
  dev_->reset();
  dev_->reset();  // idempotent
  start(config());
  expect_alive();
}

TEST_F(BlockDeviceTest, DisabledQueuesAreSkipped) {
  make_image(kDisk);
  auto d = VirtioBlock::create(config(2));
  ASSERT_TRUE(d);
  FakeVirtqueueDriver q0(ram_.mem(), 0x1000, kQueueSize);
  VirtqueueConfig q1;  // never enabled
  std::vector<UniqueFd> kicks;
  kicks.push_back(make_eventfd(0, 0).value());
  kicks.push_back(make_eventfd(0, 0).value());
  EXPECT_TRUE((*d)->activate(ram_.mem(), (*d)->device_features(), {q0.config(), q1},
                             std::move(kicks), irq_));
  (*d)->reset();
  kicks.clear();
  kicks.push_back(make_eventfd(0, 0).value());
  kicks.push_back(make_eventfd(0, 0).value());
  auto r = (*d)->activate(ram_.mem(), (*d)->device_features(), {VirtqueueConfig{}, q1},
                          std::move(kicks), irq_);
  EXPECT_FALSE(r);
}

// ---- bad user input: a clear error naming the field, before anything runs ----

TEST_F(BlockDeviceTest, MissingImage) {
  auto d = VirtioBlock::create(config());
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message().find("--disk path=" + path_), std::string::npos)
      << d.error().message();
  EXPECT_NE(d.error().message().find("No such file"), std::string::npos);
}

TEST_F(BlockDeviceTest, UnknownCacheModeAndEngine) {
  auto m = parse_cache_mode("fast");
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message().find("--disk cache=fast"), std::string::npos);
  EXPECT_EQ(parse_cache_mode("directsync").value(), CacheMode::kDirectSync);
  EXPECT_EQ(parse_cache_mode("none").value(), CacheMode::kNone);
  auto e = parse_io_engine("aio");
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().message().find("--disk engine=aio"), std::string::npos);
  EXPECT_EQ(parse_io_engine("threads").value(), IoEngineKind::kThreads);
}

TEST_F(BlockDeviceTest, SerialAndQueueLimits) {
  make_image(kDisk);
  auto c = config();
  c.serial = std::string(21, 'x');
  auto d = VirtioBlock::create(c);
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message().find("--disk serial="), std::string::npos);
  c = config();
  c.queues = 0;
  EXPECT_NE(VirtioBlock::create(c).error().message().find("--disk queues=0"), std::string::npos);
  c = config();
  c.queue_size = 100;
  EXPECT_NE(VirtioBlock::create(c).error().message().find("--disk queue_size=100"),
            std::string::npos);
}

TEST_F(BlockDeviceTest, ReadOnlyImageOpenedForWriting) {
  make_image(kDisk);
  ASSERT_EQ(::chmod(path_.c_str(), 0444), 0);
  auto d = VirtioBlock::create(config());
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message().find("--disk path=" + path_), std::string::npos);
  EXPECT_NE(d.error().message().find("read-only"), std::string::npos) << d.error().message();
  auto c = config();
  c.read_only = true;
  EXPECT_TRUE(VirtioBlock::create(c));
  EXPECT_TRUE(image_unchanged(kDisk));
}

TEST_F(BlockDeviceTest, CacheNoneWithoutODirect) {
  // tmpfs refused O_DIRECT before Linux 6.6; on newer kernels there is no such filesystem at hand.
  std::string shm = "/dev/shm/tern-blk-odirect-" + std::to_string(::getpid());
  { std::ofstream(shm) << std::string(4096, 'a'); }
  int probe = ::open(shm.c_str(), O_RDWR | O_DIRECT);
  if (probe >= 0) {
    ::close(probe);
    ::unlink(shm.c_str());
    GTEST_SKIP() << "/dev/shm supports O_DIRECT on this kernel";
  }
  DiskConfig c;
  c.path = shm;
  c.cache = CacheMode::kNone;
  auto d = VirtioBlock::create(c);
  ::unlink(shm.c_str());
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().message(), "--disk cache=none: " + shm +
                                     ": filesystem does not support O_DIRECT (use cache=writeback)");
}

TEST_F(BlockDeviceTest, NotAFile) {
  auto c = config();
  c.path = dir_;
  auto d = VirtioBlock::create(c);
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message().find("not a regular file or block device"), std::string::npos);
}

}  // namespace
}  // namespace tern::testing
