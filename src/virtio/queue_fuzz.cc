// libFuzzer target: the split virtqueue and its descriptor chain walker, then the virtio-blk
// request parser, over guest RAM made of the fuzz input (GuestMemory::wrap). The first bytes pick
// the queue size and features; the rest is RAM holding the descriptor table and the rings.
// Nothing may crash, hang or touch memory outside the wrapped buffers; every chain is bounded by
// the queue size; pop() consumes each available entry once.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "base/testing/fuzz_input.h"
#include "virtio/block/block_request.h"
#include "virtio/queue.h"
#include "virtio/virtio_spec.h"

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

  BlockLimits limits;
  limits.capacity_sectors = 1 + (size % 4096);
  limits.read_only = (size & 1) != 0;
  limits.discard = limits.write_zeroes = true;
  limits.max_discard_sectors = limits.max_write_zeroes_sectors = 1 << 20;
  limits.max_discard_seg = limits.max_write_zeroes_seg = 8;

  for (unsigned i = 0; i <= rounds % 4u; ++i) {
    for (unsigned n = 0; n < 2u * queue_size + 2; ++n) {
      uint16_t before = vq.last_avail_idx();
      PopResult p = vq.pop();
      if (p.kind == PopResult::Kind::kEmpty) break;
      if (p.kind == PopResult::Kind::kFatal) return 0;
      FUZZ_CHECK(vq.last_avail_idx() == static_cast<uint16_t>(before + 1));
      if (p.kind == PopResult::Kind::kMalformed) {
        (void)vq.add_used(p.head, 0);
        continue;
      }
      const DescriptorChain& c = p.chain;
      FUZZ_CHECK(c.head < queue_size);
      FUZZ_CHECK(c.descriptors <= queue_size + kMaxIndirectDescriptors);
      for (const auto& s : c.segments) FUZZ_CHECK(mem.slice(s.gpa, s.host.size()).has_value());
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
