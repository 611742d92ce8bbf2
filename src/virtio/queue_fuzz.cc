// libFuzzer target: the split virtqueue and its descriptor chain walker, then the virtio-blk
// request parser, over guest RAM made of the fuzz input (GuestMemory::wrap). The first bytes pick
// the queue size and features; the rest is RAM holding the descriptor table and the rings.
// Nothing may crash, hang or touch memory outside the wrapped buffers. Every pop() is compared
// with a reference model written here from virtio 1.2 §2.7 over the raw RAM bytes (not through
// GuestMemory or the walker): the same verdict (empty / chain / malformed / ring broken), the
// same available-ring position, and for a chain the same buffers (address, length, direction,
// host pointer) in order. The one latitude: a chain the model finds well-formed but longer than
// the ring (more buffers than the queue size, or an indirect table with more entries) may be
// refused — how long a chain a device accepts is its choice, bounded.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

#include "base/testing/fuzz_input.h"
#include "virtio/block/block_request.h"
#include "virtio/queue.h"
#include "virtio/virtio_spec.h"

namespace {

// Guest RAM as the model sees it: raw buffers at guest-physical bases.
struct RefRegion {
  uint64_t base;
  uint64_t size;
  uint8_t* host;
};

struct RefRam {
  std::vector<RefRegion> regions;
  // Host address of [gpa, gpa + len) when it lies inside one region (len 0: gpa in [base, end]).
  uint8_t* find(uint64_t gpa, uint64_t len) const {
    for (const auto& r : regions)
      if (gpa >= r.base && len <= r.size && gpa - r.base <= r.size - len)
        return r.host + (gpa - r.base);
    return nullptr;
  }
  std::optional<uint16_t> u16(uint64_t gpa) const {
    const uint8_t* p = find(gpa, 2);
    if (!p) return std::nullopt;
    return static_cast<uint16_t>(p[0] | p[1] << 8);
  }
};

struct RefDesc {
  uint64_t addr;
  uint32_t len;
  uint16_t flags, next;
};

std::optional<RefDesc> ref_desc(const RefRam& ram, uint64_t gpa) {
  const uint8_t* p = ram.find(gpa, 16);
  if (!p) return std::nullopt;
  RefDesc d{};
  for (int i = 7; i >= 0; --i) d.addr = d.addr << 8 | p[i];
  for (int i = 11; i >= 8; --i) d.len = d.len << 8 | p[i];
  d.flags = static_cast<uint16_t>(p[12] | p[13] << 8);
  d.next = static_cast<uint16_t>(p[14] | p[15] << 8);
  return d;
}

struct RefSegment {
  uint64_t gpa;
  uint32_t len;
  bool writable;
  uint8_t* host;
};

struct RefChain {
  enum Verdict { kChain, kMalformed, kFatal } verdict = kMalformed;
  std::vector<RefSegment> segments;
  bool longer_than_ring = false;  ///< kChain, but more buffers / table entries than the ring.
};

// The chain at `head` per virtio 1.2 §2.7.5 and §2.7.5.3, without a length limit: a loop is
// found by visiting more descriptors of one table than it has.
RefChain ref_walk(const RefRam& ram, uint64_t desc_gpa, uint16_t qsize, uint16_t head,
                  bool indirect_ok) {
  RefChain c;
  if (head >= qsize) {
    c.verdict = RefChain::kFatal;  // cannot even be returned in the used ring
    return c;
  }
  uint64_t table = desc_gpa;
  uint32_t table_len = qsize, visits = 0, index = head;
  bool indirect = false, seen_writable = false;
  for (;;) {
    if (++visits > table_len) return c;  // a loop within this table
    auto d = ref_desc(ram, table + 16ull * index);
    if (!d) return c;
    if (d->flags & tern::virtio::VIRTQ_DESC_F_INDIRECT) {
      // §2.7.5.3.1: only if negotiated, never nested, never with NEXT, a whole number of
      // 16-byte descriptors; the table must be guest RAM.
      if (!indirect_ok || indirect || (d->flags & tern::virtio::VIRTQ_DESC_F_NEXT)) return c;
      if (d->len == 0 || d->len % 16 != 0 || !ram.find(d->addr, d->len)) return c;
      table = d->addr;
      table_len = d->len / 16;
      if (table_len > qsize) c.longer_than_ring = true;
      visits = 0;
      index = 0;
      indirect = true;
      continue;
    }
    uint8_t* host = ram.find(d->addr, d->len);
    if (!host) return c;
    const bool writable = (d->flags & tern::virtio::VIRTQ_DESC_F_WRITE) != 0;
    if (!writable && seen_writable) return c;  // §2.7.4.2: readable ones first
    seen_writable = seen_writable || writable;
    c.segments.push_back({d->addr, d->len, writable, host});
    if (c.segments.size() > qsize) c.longer_than_ring = true;
    if (!(d->flags & tern::virtio::VIRTQ_DESC_F_NEXT)) {
      c.verdict = RefChain::kChain;
      return c;
    }
    if (d->next >= table_len) return c;
    index = d->next;
  }
}

// The device's view of the available ring (§2.7.6), tracked apart from Virtqueue.
struct RefQueue {
  const RefRam& ram;
  tern::VirtqueueConfig cfg;
  bool indirect_ok;
  uint16_t last_avail = 0;
  enum Kind { kEmpty, kChain, kMalformed, kFatal };
  Kind pop(RefChain& chain, uint16_t& head) {
    auto idx = ram.u16(cfg.avail_gpa + 2);
    if (!idx) return kFatal;
    const uint16_t pending = static_cast<uint16_t>(*idx - last_avail);
    if (pending == 0) return kEmpty;
    if (pending > cfg.size) return kFatal;  // more new entries than the ring holds
    auto h = ram.u16(cfg.avail_gpa + 4 + 2ull * (last_avail % cfg.size));
    if (!h) return kFatal;
    ++last_avail;
    head = *h;
    chain = ref_walk(ram, cfg.desc_gpa, cfg.size, *h, indirect_ok);
    return chain.verdict == RefChain::kChain       ? kChain
           : chain.verdict == RefChain::kMalformed ? kMalformed
                                                   : kFatal;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tern;
  using namespace tern::virtio;
  if (size < 4) return 0;
  const uint16_t queue_size = static_cast<uint16_t>(1u << (data[0] % 9));  // 1..256
  uint64_t features = feature(VIRTIO_F_VERSION_1);
  if (data[1] & 1) features |= feature(VIRTIO_F_INDIRECT_DESC);
  if (data[1] & 2) features |= feature(VIRTIO_F_EVENT_IDX);
  const uint8_t rounds = data[2];
  data += 3;
  size -= 3;

  // RAM: [0, 64 KiB) from the input (zero-padded), a hole, then 4 KiB at 1 MiB.
  constexpr size_t kLow = 64 * 1024;
  static std::vector<uint8_t> low(kLow), high(4096);
  std::memset(low.data(), 0, kLow);
  std::memcpy(low.data(), data, size < kLow ? size : kLow);
  std::memset(high.data(), 0, high.size());
  auto mem = GuestMemory::wrap(
      {MemoryRegion{0, kLow, low.data(), 0}, MemoryRegion{1 << 20, high.size(), high.data(), 0}});

  VirtqueueConfig cfg;
  cfg.size = queue_size;
  cfg.desc_gpa = 0;
  cfg.avail_gpa = 0x4000 + (data[0] >> 4);  // unaligned on purpose sometimes
  cfg.used_gpa = 0x6000;
  cfg.enabled = true;
  Virtqueue vq(mem, cfg, features);
  if (!vq.validate()) return 0;
  const RefRam ram{{RefRegion{0, kLow, low.data()}, RefRegion{1 << 20, high.size(), high.data()}}};
  RefQueue ref{ram, cfg, (features & feature(VIRTIO_F_INDIRECT_DESC)) != 0, cfg.position.next_avail};

  BlockLimits limits;
  limits.capacity_sectors = 1 + (size % 4096);
  limits.read_only = (size & 1) != 0;
  limits.discard = limits.write_zeroes = true;
  limits.max_discard_sectors = limits.max_write_zeroes_sectors = 1 << 20;
  limits.max_discard_seg = limits.max_write_zeroes_seg = 8;

  for (unsigned i = 0; i <= rounds % 4u; ++i) {
    for (unsigned n = 0; n < 2u * queue_size + 2; ++n) {
      RefChain want;
      uint16_t want_head = 0;
      const RefQueue::Kind model = ref.pop(want, want_head);  // before pop(): the same RAM
      PopResult p = vq.pop();
      FUZZ_CHECK(vq.last_avail_idx() == ref.last_avail);
      if (model == RefQueue::kEmpty) {
        FUZZ_CHECK(p.kind == PopResult::Kind::kEmpty);
        break;
      }
      if (model == RefQueue::kFatal) {
        FUZZ_CHECK(p.kind == PopResult::Kind::kFatal);
        return 0;
      }
      FUZZ_CHECK(p.kind == PopResult::Kind::kChain || p.kind == PopResult::Kind::kMalformed);
      FUZZ_CHECK(p.head == want_head);
      if (model == RefQueue::kMalformed) {
        FUZZ_CHECK(p.kind == PopResult::Kind::kMalformed);  // the model refuses it: so must tern
        (void)vq.add_used(p.head, 0);
        continue;
      }
      if (p.kind == PopResult::Kind::kMalformed) {
        FUZZ_CHECK(want.longer_than_ring);  // refusing a good chain: only one longer than the ring
        (void)vq.add_used(p.head, 0);
        continue;
      }
      const DescriptorChain& c = p.chain;
      FUZZ_CHECK(c.head == want_head);
      FUZZ_CHECK(c.segments.size() == want.segments.size());
      uint64_t readable = 0, writable = 0;
      for (size_t k = 0; k < c.segments.size(); ++k) {
        const ChainSegment& got = c.segments[k];
        const RefSegment& w = want.segments[k];
        FUZZ_CHECK(got.gpa == w.gpa && got.host.size() == w.len && got.writable == w.writable &&
                   got.host.data() == w.host);
        (w.writable ? writable : readable) += w.len;
      }
      FUZZ_CHECK(c.readable_bytes == readable && c.writable_bytes == writable);
      BlockRequest r = parse_block_request(c, limits);
      uint64_t total = 0;
      for (const auto& v : r.data) total += v.iov_len;
      if (r.op == BlockRequest::Op::kIn || r.op == BlockRequest::Op::kOut) {
        FUZZ_CHECK(total == r.len);
        FUZZ_CHECK(r.len % 512 == 0);
        FUZZ_CHECK(r.offset / 512 + r.len / 512 <= limits.capacity_sectors);
        FUZZ_CHECK(!(r.op == BlockRequest::Op::kOut && limits.read_only));
      }
      if (r.op != BlockRequest::Op::kNone) FUZZ_CHECK(r.status != nullptr);
      for (const auto& g : r.ranges)
        FUZZ_CHECK(g.offset / 512 + g.len / 512 <= limits.capacity_sectors);
      if (r.status != nullptr) *r.status = 0;  // what the device would do
      (void)vq.add_used(p.head, r.success_used_len());
    }
    (void)vq.publish_used();
    (void)vq.enable_notification();
  }
  return 0;
}
