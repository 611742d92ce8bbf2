// libFuzzer target: the tables and the cluster mapping of a qcow2 image. The input describes an
// image built in memory (header fields, where the refcount table, L1 table, refcount blocks and
// L2 tables lie, their entries, overlaps and wild offsets included), opened writable as tern
// opens a disk, then a sequence of guest requests: reads, writes, DISCARD / WRITE_ZEROES and
// flushes, served the way the block executor serves them (map(), direct extents read and written
// at their host offsets, the rest through read_sync()/write_sync()/write_zeroes()).
// Invariants: nothing crashes; memory stays bounded (the file is capped); a read through map()'s
// extents equals read_sync(); a write that succeeded reads back the written bytes, a zeroing
// that succeeded reads back zeros (checked on the request's last cluster: on a corrupt image two
// guest clusters of one request may share a host cluster, which QEMU serves the same way); and no
// request ever writes guest data (any write of 512 bytes or more: metadata updates are entries of
// at most 12 bytes, new tables go to fresh clusters) over a cluster that held metadata when the
// request started: the header, the L1 table, the refcount table, or an L2 table / refcount block
// they name, as the fuzzer computes it from the file's bytes (independently of Qcow2MetadataMap).
//
// Input: 9 bytes of layout, then the tables' entries and cluster fills (see build_image), then
// requests of 5 bytes each.
#include <endian.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

#include "base/testing/fuzz_input.h"
#include "block/qcow2/qcow2_image.h"

using namespace tern;

namespace {

constexpr uint64_t kCopied = uint64_t{1} << 63;
constexpr uint64_t kOffsetMask = 0x00fffffffffffe00ull;
constexpr uint64_t kL1Reserved = 0x7f000000000001ffull;

uint64_t get_be(const std::vector<uint8_t>& b, uint64_t off, unsigned n) {
  uint64_t v = 0;
  for (unsigned i = 0; i < n; ++i) v = (v << 8) | (off + i < b.size() ? b[off + i] : 0);
  return v;
}
void put_be(std::vector<uint8_t>& b, uint64_t off, uint64_t v, unsigned n) {
  for (unsigned i = 0; i < n; ++i) b[off + i] = static_cast<uint8_t>(v >> (8 * (n - 1 - i)));
}

// The clusters holding metadata now, from the file's bytes: header, L1 table, refcount table,
// and the L2 tables / refcount blocks their entries (without reserved bits, aligned) name.
std::set<uint64_t> metadata_clusters(const std::vector<uint8_t>& b) {
  std::set<uint64_t> s{0};
  const unsigned cb = static_cast<unsigned>(get_be(b, 20, 4));
  if (cb < 9 || cb > 21) return s;
  const uint64_t cs = uint64_t{1} << cb;
  const uint64_t l1_size = get_be(b, 36, 4), l1 = get_be(b, 40, 8);
  const uint64_t rt = get_be(b, 48, 8), rtc = get_be(b, 56, 4);
  for (uint64_t c = l1 >> cb; l1_size > 0 && c <= (l1 + l1_size * 8 - 1) >> cb; ++c) s.insert(c);
  for (uint64_t c = rt >> cb; c < (rt >> cb) + rtc; ++c) s.insert(c);
  for (uint64_t i = 0; i < l1_size && l1 + i * 8 + 8 <= b.size(); ++i) {
    const uint64_t e = get_be(b, l1 + i * 8, 8), off = e & kOffsetMask;
    if ((e & kL1Reserved) == 0 && off != 0 && off % cs == 0) s.insert(off >> cb);
  }
  for (uint64_t i = 0; i < rtc * cs / 8 && rt + i * 8 + 8 <= b.size(); ++i) {
    const uint64_t e = get_be(b, rt + i * 8, 8);
    if ((e & 0x1ff) == 0 && e != 0 && e % cs == 0) s.insert(e >> cb);
  }
  return s;
}

// The image file: a MemQcow2File whose large writes (guest data, new tables) are checked
// against the metadata clusters computed before the request.
class CheckedFile final : public Qcow2File {
 public:
  CheckedFile(std::vector<uint8_t> bytes, uint64_t max) : mem_(std::move(bytes), max) {}
  Result<void> read(uint64_t off, void* buf, size_t n) const override {
    return mem_.read(off, buf, n);
  }
  Result<void> write(uint64_t off, const void* buf, size_t n) override {
    if (n >= 512 && cluster_bits_ != 0) {
      for (uint64_t c = off >> cluster_bits_; c <= (off + n - 1) >> cluster_bits_; ++c)
        FUZZ_CHECK(!metadata_.contains(c));  // data (or a table) written over metadata
    }
    return mem_.write(off, buf, n);
  }
  uint64_t size() const override { return mem_.size(); }
  Result<void> grow_to(uint64_t size) override { return mem_.grow_to(size); }
  Result<void> sync() override { return {}; }
  /// Before each request: what must not be written over.
  void arm(unsigned cluster_bits) {
    cluster_bits_ = cluster_bits;
    metadata_ = metadata_clusters(mem_.bytes());
  }

 private:
  MemQcow2File mem_;
  unsigned cluster_bits_ = 0;
  std::set<uint64_t> metadata_;
};

// Builds the image: header fields and table locations from the first 9 bytes, then the L1 and
// refcount table entries (one byte each: a cluster index, 0 = none), then up to 15 cluster
// fills (target cluster, mode: L2 entries / refcounts of 1 / raw bytes).
std::vector<uint8_t> build_image(testing::FuzzInput& in, unsigned* cluster_bits) {
  const unsigned cb = 9 + in.u8() % 4;  // 512 B .. 4 KiB clusters
  const uint64_t cs = uint64_t{1} << cb;
  const uint8_t flags = in.u8();
  const unsigned version = (flags & 1) ? 3 : 2;
  const uint8_t order_byte = in.u8();
  const unsigned order = version == 3 ? order_byte % 7 : 4;
  const uint64_t size = (1 + uint64_t{in.u16()} % 4096) * 512;  // up to 2 MiB virtual
  const uint64_t nclusters = 6 + in.u8() % 26;
  const uint64_t rt_c = in.u8() % nclusters, rtc = 1 + in.u8() % 2, l1_c = in.u8() % nclusters;
  const uint64_t per_l1 = cs * (cs / 8);
  const uint32_t l1_size = static_cast<uint32_t>((size + per_l1 - 1) / per_l1 + (flags >> 1) % 2);
  std::vector<uint8_t> b(nclusters * cs, 0);
  auto entry_cluster = [&](uint8_t e) { return (uint64_t{e} % nclusters) << cb; };
  for (uint32_t i = 0; i < l1_size && l1_c * cs + i * 8 + 8 <= b.size(); ++i) {
    const uint8_t e = in.u8();
    if (e != 0) put_be(b, l1_c * cs + i * 8, entry_cluster(e) | ((e & 0x80) ? kCopied : 0), 8);
  }
  for (uint64_t i = 0; i < 4 && rt_c * cs + i * 8 + 8 <= b.size(); ++i) {
    const uint8_t e = in.u8();
    if (e != 0) put_be(b, rt_c * cs + i * 8, entry_cluster(e), 8);
  }
  const unsigned bits = 1u << order;
  for (unsigned fills = in.u8() % 16; fills > 0; --fills) {
    const uint64_t at = (in.u8() % nclusters) * cs;
    switch (in.u8() % 3) {
      case 0:  // L2 entries: data cluster (COPIED), v3 zero flag, or a raw compressed descriptor
        for (uint64_t k = 0; k < cs / 8; ++k) {
          const uint8_t e = in.u8();
          if (e == 0) continue;
          uint64_t v = entry_cluster(e & 0x3f) | ((e & 0x40) ? kCopied : 0);
          if ((e & 0xc0) == 0xc0)
            v = (uint64_t{1} << 62) | in.u32();  // compressed
          else if ((e & 0x80) != 0)
            v |= 1;  // zero flag
          put_be(b, at + k * 8, v, 8);
        }
        break;
      case 1:  // refcount block: every cluster of the file counted once
        for (uint64_t k = 0; k < nclusters && (k + 1) * bits <= cs * 8; ++k) {
          if (bits >= 8)
            b[at + k * bits / 8 + bits / 8 - 1] = 1;
          else
            b[at + k * bits / 8] |= static_cast<uint8_t>(1u << ((k * bits) % 8));
        }
        break;
      default:  // raw bytes
        for (uint64_t k = 0; k < cs && !in.empty(); ++k) b[at + k] = in.u8();
        break;
    }
  }
  // The header last (over whatever a fill left in cluster 0), then an empty extension area.
  std::memset(b.data(), 0, 112);
  put_be(b, 0, kQcow2Magic, 4);
  put_be(b, 4, version, 4);
  put_be(b, 20, cb, 4);
  put_be(b, 24, size, 8);
  put_be(b, 36, l1_size, 4);
  put_be(b, 40, l1_c * cs, 8);
  put_be(b, 48, rt_c * cs, 8);
  put_be(b, 56, rtc, 4);
  if (version == 3) {
    put_be(b, 96, order, 4);
    put_be(b, 100, 104, 4);
  }
  *cluster_bits = cb;
  return b;
}

// A read as the executor does it: map() extents, direct ones at their host offsets.
bool read_mapped(Qcow2Image& q, Qcow2File& f, uint64_t off, uint8_t* buf, uint64_t len) {
  std::vector<Qcow2Extent> ext;
  if (!q.map(off, len, false, ext)) return false;
  for (const auto& e : ext) {
    uint8_t* p = buf + (e.guest_off - off);
    if (!(e.direct ? f.read(e.host, p, e.len) : q.read_sync(e.guest_off, p, e.len))) return false;
  }
  return true;
}

// A write as the executor does it.
bool write_mapped(Qcow2Image& q, Qcow2File& f, uint64_t off, const uint8_t* buf, uint64_t len) {
  std::vector<Qcow2Extent> ext;
  if (!q.map(off, len, true, ext)) return false;
  uint64_t total = 0;
  for (const auto& e : ext) total += e.len;
  FUZZ_CHECK(total == len);
  for (const auto& e : ext) {
    const uint8_t* p = buf + (e.guest_off - off);
    if (!(e.direct ? f.write(e.host, p, e.len) : q.write_sync(e.guest_off, p, e.len))) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  testing::quiet_logs();
  testing::FuzzInput in(data, size);
  unsigned cb = 0;
  std::vector<uint8_t> bytes = build_image(in, &cb);
  auto owned = std::make_unique<CheckedFile>(std::move(bytes), (32u << 20));
  CheckedFile* file = owned.get();
  Qcow2OpenOptions o;
  o.what = "fuzz";
  o.writable = true;
  o.sync_metadata = false;
  o.block_device = size > 0 && (data[0] & 0x80) != 0;  // allocation from the refcounts
  auto img = Qcow2Image::open(std::move(owned), "/nonexistent", o);
  if (!img) return 0;
  Qcow2Image& q = **img;
  const uint64_t sectors = q.size() / 512;
  std::vector<uint8_t> buf, back;
  for (unsigned n = 0; n < 64 && in.remaining() >= 5; ++n) {
    const uint8_t op = in.u8();
    const uint64_t first = in.u16() % sectors;
    const uint64_t len = std::min<uint64_t>(1 + in.u8() % 64, sectors - first) * 512;
    const uint64_t off = first * 512;
    const uint8_t fill = in.u8();
    file->arm(cb);
    back.assign(len, 0);
    // The request's last cluster piece: [tail, len) of the buffers.
    const uint64_t cs = uint64_t{1} << cb;
    const uint64_t tail = std::max(off, (off + len - 1) & ~(cs - 1)) - off;
    auto same_tail = [&](const std::vector<uint8_t>& want) {
      return std::equal(back.begin() + static_cast<long>(tail), back.end(),
                        want.begin() + static_cast<long>(tail));
    };
    switch (op % 5) {
      case 0: {  // read: map()'s extents agree with read_sync()
        buf.assign(len, 0);
        if (read_mapped(q, *file, off, buf.data(), len) && q.read_sync(off, back.data(), len))
          FUZZ_CHECK(buf == back);
        break;
      }
      case 1:
      case 2: {  // write (a pattern naming the request), then read back
        buf.resize(len);
        for (uint64_t i = 0; i < len; ++i) buf[i] = static_cast<uint8_t>(fill + n + i / 512);
        const bool ok = op % 5 == 1 ? write_mapped(q, *file, off, buf.data(), len)
                                    : static_cast<bool>(q.write_sync(off, buf.data(), len));
        if (ok && q.read_sync(off, back.data(), len)) FUZZ_CHECK(same_tail(buf));
        break;
      }
      case 3: {  // DISCARD / WRITE_ZEROES (one path in tern), then read back zeros
        if (q.write_zeroes(off, len) && q.read_sync(off, back.data(), len))
          FUZZ_CHECK(same_tail(std::vector<uint8_t>(len, 0)));
        break;
      }
      default:
        (void)q.flush();
        break;
    }
  }
  return 0;
}
