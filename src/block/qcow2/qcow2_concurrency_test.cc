// Many writers allocating in one qcow2 image at once (the queues of one disk share a Qcow2Image):
// no host cluster is handed out twice, every allocated cluster has refcount 1, a concurrent
// reader never sees another block's bytes (no stale or shared L2 entry), and after a clean close
// `qemu-img check` is clean without leaks (the reserved clusters went back) and `qemu-img
// compare` agrees with what was written.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <set>
#include <thread>

#include "base/testing/temp_dir.h"
#include "block/disk_image.h"
#include "block/qcow2/testing/qemu_img.h"

namespace tern {
namespace {

using testing::run_command;

constexpr uint64_t kDisk = 32u << 20, kBlock = 4096;
constexpr unsigned kWriters = 6;

// The bytes block b holds once written (blocks with b % 17 == 0 are never written: zeros).
std::vector<uint8_t> block_bytes(uint64_t b) {
  std::vector<uint8_t> v(kBlock);
  for (size_t i = 0; i < kBlock; ++i) v[i] = static_cast<uint8_t>((b * 131 + i / 512 + 1) % 251 + 1);
  return v;
}
bool written(uint64_t b) { return b % 17 != 0; }

class Qcow2ConcurrencyTest : public ::testing::TestWithParam<const char*> {
 protected:
  std::string path(const std::string& n) const { return dir_.path() + "/" + n; }
  testing::TempDir dir_{"tern-qcow2-mt"};
};

TEST_P(Qcow2ConcurrencyTest, WritersAllocatingAtOnceGetDistinctClustersWithRefcountOne) {
  ASSERT_EQ(run_command("qemu-img --version").status, 0) << "qemu-img missing (qemu-utils)";
  const std::string img = path("mt.qcow2");
  ASSERT_EQ(run_command(std::string("qemu-img create -q -f qcow2 -o cluster_size=") + GetParam() +
                        " " + img + " " + std::to_string(kDisk))
                .status,
            0);
  const uint64_t blocks = kDisk / kBlock;
  {
    DiskConfig c;
    c.path = img;
    auto d = DiskImage::open(c);
    ASSERT_TRUE(d) << d.error().message();
    Qcow2Image& q = *d->qcow2();
    const uint64_t cs = q.header().cluster_size;
    std::atomic<bool> done{false};
    std::atomic<int> bad_reads{0}, failures{0};
    // Writer t writes the blocks b with b % kWriters == t in its own random order, so every
    // cluster (16 blocks of 64 KiB) is allocated by whichever writer comes first while the
    // others write into it; some writes span two blocks (two writers' blocks: the same bytes).
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < kWriters; ++t) {
      threads.emplace_back([&, t] {
        std::vector<uint64_t> mine;
        for (uint64_t b = t; b < blocks; b += kWriters)
          if (written(b)) mine.push_back(b);
        std::shuffle(mine.begin(), mine.end(), std::mt19937(t + 1));
        for (uint64_t b : mine) {
          auto bytes = block_bytes(b);
          if (!q.write_sync(b * kBlock, bytes.data(), kBlock)) ++failures;
        }
      });
    }
    // A reader meanwhile: every block reads as zeros (not written yet) or as its bytes.
    std::thread reader([&] {
      std::mt19937 rng(99);
      std::vector<uint8_t> buf(2 * kBlock);
      const std::vector<uint8_t> zeros(kBlock, 0);
      while (!done.load()) {
        const uint64_t b = rng() % (blocks - 1);
        if (!q.read_sync(b * kBlock, buf.data(), buf.size())) {
          ++failures;
          continue;
        }
        for (uint64_t k = 0; k < 2; ++k) {
          const uint8_t* p = buf.data() + k * kBlock;
          auto want = block_bytes(b + k);
          if (!std::equal(p, p + kBlock, zeros.begin()) && !std::equal(p, p + kBlock, want.begin()))
            ++bad_reads;
        }
      }
    });
    for (auto& th : threads) th.join();
    done = true;
    reader.join();
    EXPECT_EQ(failures.load(), 0);
    EXPECT_EQ(bad_reads.load(), 0);
    // Every guest cluster maps to its own host cluster, counted exactly once.
    std::set<uint64_t> hosts;
    for (uint64_t gc = 0; gc < kDisk / cs; ++gc) {
      std::vector<Qcow2Extent> ext;
      ASSERT_TRUE(q.map(gc * cs, cs, false, ext));
      ASSERT_EQ(ext.size(), 1u);
      bool any = false;  // a cluster none of whose blocks was written stays unallocated
      for (uint64_t b = gc * cs / kBlock; b < (gc + 1) * cs / kBlock; ++b) any = any || written(b);
      ASSERT_EQ(ext[0].direct, any) << "guest cluster " << gc;
      if (!any) continue;
      EXPECT_TRUE(hosts.insert(ext[0].host).second) << "host cluster handed out twice: " << ext[0].host;
      auto rc = q.host_refcount(ext[0].host);
      ASSERT_TRUE(rc);
      EXPECT_EQ(*rc, 1u) << "host cluster " << ext[0].host;
    }
    ASSERT_TRUE(q.flush());
  }
  std::vector<uint8_t> expected(kDisk, 0);
  for (uint64_t b = 0; b < blocks; ++b) {
    if (!written(b)) continue;
    auto bytes = block_bytes(b);
    std::copy(bytes.begin(), bytes.end(), expected.begin() + static_cast<long>(b * kBlock));
  }
  testing::write_file(path("mt.raw"), expected);
  auto check = run_command("qemu-img check " + img);
  EXPECT_EQ(check.status, 0) << check.output;  // no corruption and no leaks after a clean close
  auto cmp = run_command("qemu-img compare -f qcow2 -F raw " + img + " " + path("mt.raw"));
  EXPECT_EQ(cmp.status, 0) << cmp.output;
}

// 64 KiB (qemu-img's default: 4 KiB writes allocate partial clusters) and 4 KiB clusters (every
// write covers a whole cluster).
INSTANTIATE_TEST_SUITE_P(ClusterSizes, Qcow2ConcurrencyTest, ::testing::Values("65536", "4096"));

}  // namespace
}  // namespace tern
