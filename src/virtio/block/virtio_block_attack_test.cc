// VirtioBlock under requests built to break the bounce path and the engines (review of issue #8):
// multi-MiB O_DIRECT requests mixing aligned, unaligned and empty segments (bytes on disk and in
// guest memory, nothing written outside the buffers), segment counts and sizes exactly at and one
// past size_max / seg_max, resets and quiesces while requests wait for bounce chunks or sit in
// the io_uring backlog, DISCARD / WRITE_ZEROES lists with overlapping and out-of-range segments,
// GET_ID split across descriptors, FLUSH under every cache mode. Both engines.
#include <gtest/gtest.h>
#include <sys/uio.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>

#include "base/testing/eventually.h"
#include "block/bounce_pool.h"
#include "block/io_uring_engine.h"
#include "virtio/block/virtio_blk_spec.h"
#include "virtio/block/virtio_block.h"
#include "virtio/testing/fake_virtqueue_driver.h"
#include "virtio/virtio_spec.h"

namespace tern::testing {
namespace {

using namespace virtio;
using Buf = FakeVirtqueueDriver::Buf;

/// 32 MiB of guest RAM in one region (4 KiB aligned host buffer).
class BigRam {
 public:
  static constexpr uint64_t kSize = 32 << 20;
  BigRam()
      : buf_(static_cast<uint8_t*>(std::aligned_alloc(4096, kSize))),
        mem_(GuestMemory::wrap({MemoryRegion{0, kSize, buf_.get(), 0}})) {
    std::memset(buf_.get(), 0, kSize);
  }
  const GuestMemory& mem() const { return mem_; }
  uint8_t* at(uint64_t gpa) { return buf_.get() + gpa; }

 private:
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> buf_;
  GuestMemory mem_;
};

struct EngineParam {
  IoEngineKind engine;
  const char* name;
};
void PrintTo(const EngineParam& p, std::ostream* os) { *os << p.name; }  // not its padding bytes

class BlockAttackTest : public ::testing::TestWithParam<EngineParam> {
 protected:
  static constexpr uint16_t kQueueSize = 64;
  static constexpr uint64_t kRingGpa = 0x1000;
  static constexpr uint64_t kTablesGpa = 0x40000;    // indirect tables, 0x1000 apart
  static constexpr uint64_t kHeadersGpa = 0x100000;  // 16 bytes each
  static constexpr uint64_t kStatusGpa = 0x110000;   // 1 byte each
  static constexpr uint64_t kDataGpa = 0x200000;     // data area up to the end of RAM

  void SetUp() override {
    if (GetParam().engine == IoEngineKind::kIoUring && !io_uring_usable())
      GTEST_SKIP() << "io_uring not usable here";
    char tmpl[] = "/tmp/tern-blk-attack-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/disk.img";
  }
  void TearDown() override {
    if (dev_) dev_->reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  static uint8_t pattern(uint64_t i) { return static_cast<uint8_t>((i * 7 + i / 512) ^ 0x5a); }
  void make_image(uint64_t size) {
    std::vector<uint8_t> b(size);
    for (uint64_t i = 0; i < size; ++i) b[i] = pattern(i);
    std::ofstream(path_, std::ios::binary)
        .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(size));
  }
  std::vector<uint8_t> file_bytes() {
    std::ifstream f(path_, std::ios::binary);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
  }

  void start(CacheMode cache) {
    DiskConfig c;
    c.path = path_;
    c.serial = "attack-serial-012345";  // exactly 20 bytes: no NUL terminator
    c.queue_size = kQueueSize;
    c.cache = cache;
    c.engine = GetParam().engine;
    dev_.reset();  // a previous device holds the image's lock until it goes
    auto d = VirtioBlock::create(c);
    ASSERT_TRUE(d) << d.error().message();
    dev_ = *d;
    activate();
  }
  void activate() {
    (void)ram_.mem().write(kRingGpa, std::vector<uint8_t>(0x10000, 0));
    drv_ = std::make_unique<FakeVirtqueueDriver>(ram_.mem(), kRingGpa, kQueueSize);
    auto k = make_eventfd(0, 0);
    ASSERT_TRUE(k);
    kick_.reset(::dup(k->get()));
    std::vector<UniqueFd> kicks;
    kicks.push_back(std::move(*k));
    auto r = dev_->activate(ram_.mem(), dev_->device_features(), {drv_->config()}, std::move(kicks),
                            irq_);
    ASSERT_TRUE(r) << r.error().message();
  }
  void kick() {
    uint64_t one = 1;
    ASSERT_EQ(::write(kick_.get(), &one, sizeof one), 8);
  }
  bool wait_used(uint16_t idx) {
    return irq_->wait_until([&] {
      for (;;) {
        uint16_t seen = drv_->used_idx();
        if (seen == idx) return true;
        drv_->set_used_event(seen);
        std::atomic_thread_fence(std::memory_order_seq_cst);
        if (drv_->used_idx() == seen) return false;
      }
    });
  }
  /// Request i: header, `data`, status, as indirect table i (any number of data descriptors up to
  /// the queue size). Does not kick.
  void post(int i, uint32_t type, uint64_t sector, const std::vector<Buf>& data) {
    uint64_t hdr = kHeadersGpa + 16ull * i;
    (void)ram_.mem().write_obj(hdr, VirtioBlkOuthdr{type, 0, sector});
    (void)ram_.mem().write_obj<uint8_t>(kStatusGpa + i, 0xff);
    std::vector<Buf> bufs{{hdr, 16, false}};
    bufs.insert(bufs.end(), data.begin(), data.end());
    bufs.push_back({kStatusGpa + static_cast<uint64_t>(i), 1, true});
    drv_->add_indirect(kTablesGpa + 0x1000ull * i, bufs);
  }
  /// Posts one request, kicks, waits, returns its status.
  uint8_t run(uint32_t type, uint64_t sector, const std::vector<Buf>& data) {
    uint16_t want = static_cast<uint16_t>(drv_->used_idx() + 1);
    drv_->set_used_event(drv_->used_idx());
    post(0, type, sector, data);
    kick();
    EXPECT_TRUE(wait_used(want)) << "request not completed";
    return status(0);
  }
  uint8_t status(int i) { return ram_.mem().read_obj<uint8_t>(kStatusGpa + i).value(); }

  std::string dir_, path_;
  BigRam ram_;
  std::shared_ptr<FakeVirtioInterrupt> irq_ = std::make_shared<FakeVirtioInterrupt>();
  std::shared_ptr<VirtioBlock> dev_;
  std::unique_ptr<FakeVirtqueueDriver> drv_;
  UniqueFd kick_;
};

/// A data layout: segments of the given lengths at GPAs from `base`, each `skew` bytes past a
/// 4 KiB boundary (0: aligned), with a 4 KiB + 64 gap between segments for canaries.
std::vector<Buf> layout(uint64_t base, const std::vector<std::pair<uint32_t, uint32_t>>& len_skew,
                        bool writable) {
  std::vector<Buf> out;
  uint64_t gpa = base;
  for (auto [len, skew] : len_skew) {
    gpa = ((gpa + 4095) & ~uint64_t{4095}) + skew;
    out.push_back({gpa, len, writable});
    gpa += len + 4096 + 64;
  }
  return out;
}

uint64_t total(const std::vector<Buf>& v) {
  uint64_t n = 0;
  for (auto& b : v) n += b.len;
  return n;
}

TEST_P(BlockAttackTest, MultiMiBMixedSegmentsThroughTheBounceBudget) {
  constexpr uint64_t kImage = 16 << 20;
  make_image(kImage);
  start(CacheMode::kNone);
  ASSERT_TRUE(dev_->disk().direct());
  // 5 MiB + 8 KiB in segments that are aligned, odd, 1 byte past a page, empty, and exactly
  // size_max: the whole request is bounced (one unaligned segment suffices), in > 4 chunks.
  const std::vector<std::pair<uint32_t, uint32_t>> w = {
      {1 << 20, 0},           {0, 0},          {512, 1}, {1 << 20, 3}, {4096, 0},
      {(1 << 20) - 512, 511}, {1536, 0},       {0, 17},  {1 << 20, 1}, {512, 0},
      {(1 << 20) + 0, 2048},  {4096 + 2048, 7}};
  auto wbufs = layout(kDataGpa, w, false);
  const uint64_t len = total(wbufs);
  ASSERT_EQ(len % 4096, 0u);
  ASSERT_GT(len, BouncePool::kDefaultChunks * BouncePool::kDefaultChunkBytes);
  std::mt19937 rng(42);
  std::vector<uint8_t> data(len);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  // Canaries around every segment.
  std::memset(ram_.at(kDataGpa), 0xcc, 16 << 20);
  uint64_t off = 0;
  for (auto& b : wbufs) {
    std::memcpy(ram_.at(b.gpa), data.data() + off, b.len);
    off += b.len;
  }
  const uint64_t sector = 8 * 3;  // 12 KiB into the disk
  EXPECT_EQ(run(VIRTIO_BLK_T_OUT, sector, wbufs), VIRTIO_BLK_S_OK);
  auto f = file_bytes();
  ASSERT_EQ(f.size(), kImage);
  EXPECT_TRUE(std::equal(data.begin(), data.end(), f.begin() + sector * 512)) << "bytes on disk";
  for (uint64_t i = 0; i < sector * 512; ++i) ASSERT_EQ(f[i], pattern(i)) << i;
  for (uint64_t i = sector * 512 + len; i < kImage; ++i) ASSERT_EQ(f[i], pattern(i)) << i;
  EXPECT_GE(dev_->stats().bounced, 1u);

  // Read it back with another segmentation into fresh canaried memory.
  const std::vector<std::pair<uint32_t, uint32_t>> r = {
      {4096, 5}, {0, 0},       {1 << 20, 0},         {1 << 20, 4095},
      {512, 0},  {1 << 20, 1}, {(1 << 20) - 512, 0}, {1 << 20, 33}};
  auto rbufs = layout(kDataGpa + (10 << 20), r, true);
  uint64_t rlen = total(rbufs);
  ASSERT_LE(rlen, len);
  ASSERT_EQ(rlen % 4096, 0u);
  EXPECT_EQ(run(VIRTIO_BLK_T_IN, sector, rbufs), VIRTIO_BLK_S_OK);
  auto used = drv_->used_elem(static_cast<uint16_t>(drv_->used_idx() - 1));
  EXPECT_EQ(used.len, rlen + 1);
  off = 0;
  for (auto& b : rbufs) {
    ASSERT_EQ(std::memcmp(ram_.at(b.gpa), data.data() + off, b.len), 0) << "segment at " << b.gpa;
    // Nothing written just before or after the segment.
    if (b.gpa > kDataGpa) {
      EXPECT_EQ(*ram_.at(b.gpa - 1), 0xcc) << b.gpa;
    }
    EXPECT_EQ(*ram_.at(b.gpa + b.len), 0xcc) << b.gpa;
    off += b.len;
  }
  EXPECT_LE(dev_->stats().bounce_bytes,
            BouncePool::kDefaultChunks * BouncePool::kDefaultChunkBytes);
}

TEST_P(BlockAttackTest, SegmentsExactlyAtSizeMaxAndSegMax) {
  constexpr uint64_t kImage = 64 << 20;
  make_image(kImage);
  start(CacheMode::kNone);
  const uint32_t seg_max = dev_->config_space().seg_max, size_max = dev_->config_space().size_max;
  ASSERT_EQ(seg_max, kQueueSize - 2u);
  ASSERT_EQ(size_max, 1u << 20);
  // seg_max segments of size_max each (aliased, odd): 62 MiB through the 1 MiB chunks.
  const uint64_t odd = kDataGpa + 1;
  std::vector<uint8_t> buf(size_max);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<uint8_t>(i * 31 + 1);
  (void)ram_.mem().write(odd, buf);
  std::vector<Buf> segs(seg_max, Buf{odd, size_max, false});
  EXPECT_EQ(run(VIRTIO_BLK_T_OUT, 0, segs), VIRTIO_BLK_S_OK);
  auto f = file_bytes();
  for (uint32_t s = 0; s < seg_max; ++s)
    ASSERT_TRUE(std::equal(buf.begin(), buf.end(), f.begin() + uint64_t{s} * size_max)) << s;
  EXPECT_EQ(dev_->stats().over_limits, 0u);
  // One segment of size_max + 512 (a READ into writable segments): refused before any I/O.
  std::vector<Buf> rsegs(seg_max, Buf{odd, size_max, true});
  rsegs[seg_max / 2].len = size_max + 512;
  EXPECT_EQ(run(VIRTIO_BLK_T_IN, 0, rsegs), VIRTIO_BLK_S_IOERR);
  EXPECT_EQ(dev_->stats().over_limits, 1u);
  // seg_max + 1 data segments in a table of exactly queue size entries: the first shares the
  // header's descriptor. Refused.
  (void)ram_.mem().write_obj(kHeadersGpa, VirtioBlkOuthdr{VIRTIO_BLK_T_OUT, 0, 0});
  (void)ram_.mem().write_obj<uint8_t>(kStatusGpa, 0xff);
  std::vector<Buf> bufs{{kHeadersGpa, 16 + 512, false}};
  for (uint32_t i = 0; i < seg_max; ++i) bufs.push_back({odd, size_max, false});
  bufs.push_back({kStatusGpa, 1, true});
  ASSERT_EQ(bufs.size(), kQueueSize);
  uint16_t want = static_cast<uint16_t>(drv_->used_idx() + 1);
  drv_->set_used_event(drv_->used_idx());
  drv_->add_indirect(kTablesGpa, bufs);
  kick();
  ASSERT_TRUE(wait_used(want));
  EXPECT_EQ(status(0), VIRTIO_BLK_S_IOERR);
  EXPECT_EQ(dev_->stats().over_limits, 2u);
  // The disk still holds the first write.
  f = file_bytes();
  EXPECT_TRUE(std::equal(buf.begin(), buf.end(), f.begin()));
}

TEST_P(BlockAttackTest, ResetWhileRequestsWaitForBounceChunks) {
  constexpr uint64_t kImage = 32 << 20;
  make_image(kImage);
  start(CacheMode::kNone);
  std::vector<uint8_t> buf(1 << 20, 0xab);
  (void)ram_.mem().write(kDataGpa + 1, buf);
  for (int round = 0; round < 10; ++round) {
    // 16 requests of 3 x 1 MiB each at an odd address: 4 run, 12 wait for chunks.
    dev_->quiesce();
    for (int i = 0; i < 16; ++i)
      post(i, round % 2 ? VIRTIO_BLK_T_IN : VIRTIO_BLK_T_OUT, uint64_t(i) * 3 * 2048,
           std::vector<Buf>(3, Buf{kDataGpa + 1, 1 << 20, round % 2 == 1}));
    dev_->unquiesce();
    kick();
    if (round % 3 == 1) std::this_thread::sleep_for(std::chrono::milliseconds(round));
    dev_->reset();  // must return: the worker drains (waiters included) and joins
    EXPECT_EQ(dev_->stats().bounce_bytes, 0u);
    activate();
  }
  EXPECT_GT(dev_->stats().bounce_waits, 0u);  // resets did find requests waiting
  // The device still works after all that.
  EXPECT_EQ(run(VIRTIO_BLK_T_IN, 0, {{kDataGpa + 3, 4096, true}}), VIRTIO_BLK_S_OK);
}

TEST_P(BlockAttackTest, QuiesceWhileRequestsWaitCompletesThemAll) {
  constexpr uint64_t kImage = 32 << 20;
  make_image(kImage);
  start(CacheMode::kNone);
  std::vector<uint8_t> buf(1 << 20);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<uint8_t>(i ^ (i >> 9));
  (void)ram_.mem().write(kDataGpa + 1, buf);
  dev_->quiesce();
  for (int i = 0; i < 16; ++i)
    post(i, VIRTIO_BLK_T_OUT, uint64_t(i) * 2 * 2048,
         std::vector<Buf>(2, Buf{kDataGpa + 1, 1 << 20, false}));
  dev_->unquiesce();
  kick();
  // The worker takes all 16 in one pass of the ring (no completion runs meanwhile): 4 get bounce
  // buffers, 12 wait for them. Quiesce only then (a quiesce cuts the pass short).
  ASSERT_TRUE(tern::testing::eventually([&] { return dev_->stats().bounce_waits == 12u; }));
  dev_->quiesce();  // every request taken completes before this returns
  auto pos = dev_->queue_positions();
  ASSERT_EQ(pos.size(), 1u);
  EXPECT_EQ(pos[0].next_avail, pos[0].next_used);
  EXPECT_EQ(drv_->used_idx(), pos[0].next_used);
  dev_->unquiesce();
  ASSERT_TRUE(wait_used(16));
  for (int i = 0; i < 16; ++i) EXPECT_EQ(status(i), VIRTIO_BLK_S_OK) << i;
  EXPECT_EQ(dev_->stats().bounce_waits, 12u);
  auto f = file_bytes();
  for (uint64_t m = 0; m < 32; ++m)
    ASSERT_TRUE(std::equal(buf.begin(), buf.end(), f.begin() + (m << 20))) << m;
}

TEST_P(BlockAttackTest, ResetWithAFullIoBacklog) {
  // Every slot a DISCARD of max_discard_seg ranges (32x the ring), then reset at once.
  make_image(kQueueSize * 64 * 512);
  start(CacheMode::kWriteback);
  uint32_t segs = dev_->config_space().max_discard_seg;
  for (int round = 0; round < 5; ++round) {
    dev_->quiesce();
    for (int i = 0; i < kQueueSize; ++i) {
      std::vector<VirtioBlkDiscardWriteZeroes> list(segs);
      for (uint32_t j = 0; j < segs; ++j)
        list[j] = VirtioBlkDiscardWriteZeroes{uint64_t(i) * 64 + j * 2, 1, 0};
      uint64_t gpa = kDataGpa + 0x200ull * i;
      (void)ram_.mem().write(gpa, std::span(reinterpret_cast<const uint8_t*>(list.data()),
                                            list.size() * sizeof list[0]));
      post(i, round % 2 ? VIRTIO_BLK_T_WRITE_ZEROES : VIRTIO_BLK_T_DISCARD, 0,
           {{gpa, segs * 16, false}});
    }
    dev_->unquiesce();
    kick();
    dev_->reset();
    activate();
  }
  EXPECT_EQ(run(VIRTIO_BLK_T_IN, 0, {{kDataGpa, 512, true}}), VIRTIO_BLK_S_OK);
  EXPECT_EQ(dev_->stats().host_io_errors, 0u);
}

TEST_P(BlockAttackTest, DiscardAndWriteZeroesSegmentLists) {
  constexpr uint64_t kImage = 1 << 20;
  make_image(kImage);
  start(CacheMode::kDirectSync);
  const uint64_t cap = kImage / 512;
  auto list = [&](std::vector<VirtioBlkDiscardWriteZeroes> l) {
    (void)ram_.mem().write(
        kDataGpa, std::span(reinterpret_cast<const uint8_t*>(l.data()), l.size() * sizeof l[0]));
    return std::vector<Buf>{{kDataGpa, static_cast<uint32_t>(l.size() * 16), false}};
  };
  // Overlapping and repeated ranges, an empty one, one ending exactly at the end of the disk.
  EXPECT_EQ(run(VIRTIO_BLK_T_WRITE_ZEROES, 0,
                list({{8, 8, 0}, {12, 8, 0}, {8, 8, 1}, {100, 0, 0}, {cap - 1, 1, 0}})),
            VIRTIO_BLK_S_OK);
  auto f = file_bytes();
  for (uint64_t i = 0; i < kImage; ++i) {
    bool zero = (i >= 8 * 512 && i < 20 * 512) || i >= (cap - 1) * 512;
    ASSERT_EQ(f[i], zero ? 0 : pattern(i)) << i;
  }
  // One range past the end in an otherwise good list: IOERR and nothing done at all.
  EXPECT_EQ(run(VIRTIO_BLK_T_DISCARD, 0, list({{40, 8, 0}, {cap, 1, 0}})), VIRTIO_BLK_S_IOERR);
  EXPECT_EQ(run(VIRTIO_BLK_T_DISCARD, 0, list({{40, 8, 0}, {UINT64_MAX - 3, 8, 0}})),
            VIRTIO_BLK_S_IOERR);
  EXPECT_EQ(run(VIRTIO_BLK_T_DISCARD, 0, list({{40, 8, 0}, {cap - 4, 0x3fffff, 0}})),
            VIRTIO_BLK_S_IOERR);
  f = file_bytes();
  for (uint64_t i = 40 * 512; i < 48 * 512; ++i) ASSERT_EQ(f[i], pattern(i)) << i;
  // max_discard_seg + 1 segments: IOERR.
  std::vector<VirtioBlkDiscardWriteZeroes> many(dev_->config_space().max_discard_seg + 1,
                                                VirtioBlkDiscardWriteZeroes{40, 1, 0});
  EXPECT_EQ(run(VIRTIO_BLK_T_DISCARD, 0, list(many)), VIRTIO_BLK_S_IOERR);
  many.pop_back();
  EXPECT_EQ(run(VIRTIO_BLK_T_DISCARD, 0, list(many)), VIRTIO_BLK_S_OK);
  f = file_bytes();
  EXPECT_EQ(f[40 * 512], 0);
  EXPECT_EQ(f[41 * 512], pattern(41 * 512));
}

TEST_P(BlockAttackTest, GetIdSplitAcrossDescriptorsAndFlushUnderEveryCacheMode) {
  make_image(1 << 20);
  for (CacheMode m :
       {CacheMode::kWriteback, CacheMode::kNone, CacheMode::kUnsafe, CacheMode::kDirectSync}) {
    if (dev_) dev_->reset();
    start(m);
    std::vector<Buf> ids;
    std::memset(ram_.at(kDataGpa), 0xee, 64);
    for (int i = 0; i < 20; ++i) ids.push_back({kDataGpa + 2ull * i, 1, true});  // 1 byte each
    EXPECT_EQ(run(VIRTIO_BLK_T_GET_ID, 0, ids), VIRTIO_BLK_S_OK);
    const char* want = "attack-serial-012345";
    for (int i = 0; i < 20; ++i) {
      EXPECT_EQ(*ram_.at(kDataGpa + 2ull * i), static_cast<uint8_t>(want[i])) << i;
      EXPECT_EQ(*ram_.at(kDataGpa + 2ull * i + 1), 0xee) << i;  // the gaps untouched
    }
    auto used = drv_->used_elem(static_cast<uint16_t>(drv_->used_idx() - 1));
    EXPECT_EQ(used.len, 21u);
    EXPECT_EQ(run(VIRTIO_BLK_T_FLUSH, 0, {}), VIRTIO_BLK_S_OK);
    // A FLUSH with a (meaningless) data buffer still completes.
    EXPECT_EQ(run(VIRTIO_BLK_T_FLUSH, 0, {{kDataGpa, 512, false}}), VIRTIO_BLK_S_OK);
  }
}

INSTANTIATE_TEST_SUITE_P(Engines, BlockAttackTest,
                         ::testing::Values(EngineParam{IoEngineKind::kThreads, "threads"},
                                           EngineParam{IoEngineKind::kIoUring, "io_uring"}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace tern::testing
