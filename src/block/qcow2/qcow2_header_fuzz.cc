// libFuzzer target: a qcow2 image from arbitrary bytes, opened as tern opens a disk (header and
// header extensions, L1 and refcount tables: Qcow2Image::open), then mapped, read and written
// (L2 lookups, compressed clusters, allocation, refcount blocks) at offsets taken from the
// input's first 16 bytes. Nothing may crash, and memory stays bounded: the file lives in memory
// (at most 8 MiB more than the input) and every table tern allocates is capped or backed by the
// file's bytes. A read of an opened image always fills the buffer (any failure is an Error).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/testing/fuzz_input.h"
#include "block/qcow2/qcow2_image.h"

using namespace tern;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  testing::quiet_logs();
  if (size < 16) return 0;
  testing::FuzzInput in(data, 16);
  std::vector<uint8_t> bytes(data + 16, data + size);
  auto file = std::make_unique<MemQcow2File>(std::move(bytes), size + (8u << 20));
  Qcow2OpenOptions o;
  o.what = "fuzz";
  o.writable = true;
  o.backing_files = false;  // a named backing file is refused before any host path is opened
  o.sync_metadata = false;
  auto img = Qcow2Image::open(std::move(file), "/nonexistent", o);
  if (!img) return 0;
  Qcow2Image& q = **img;
  const uint64_t disk = q.size();
  if (disk == 0) return 0;
  for (int round = 0; round < 4; ++round) {
    const uint64_t off = in.u32() % disk;
    const uint64_t len = std::min<uint64_t>(1 + in.u16() % (256 * 1024), disk - off);
    std::vector<Qcow2Extent> ext;
    if (q.map(off, len, round % 2 == 1, ext)) {
      uint64_t total = 0;
      for (const auto& e : ext) total += e.len;
      FUZZ_CHECK(total == len);
    }
    std::vector<uint8_t> buf(len, 0xa5);
    (void)q.read_sync(off, buf.data(), len);
    if (round % 2 == 1) (void)q.write_sync(off, buf.data(), len);
    if (round == 3) (void)q.write_zeroes(off, len);
  }
  return 0;
}
