// libFuzzer target: parse_block_request on arbitrary chains. The input describes up to 16
// segments (offset, length, writable) over a 16 KiB RAM buffer that the rest of the input fills,
// so headers, segment lists and status bytes land anywhere, split anywhere. The parser must never
// crash, and what it accepts must be consistent (data inside the chain, ranges inside the disk).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "base/testing/fuzz_input.h"
#include "virtio/block/block_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tern;
  using namespace tern::virtio;
  if (size < 2) return 0;
  constexpr size_t kRam = 16 * 1024;
  static std::vector<uint8_t> ram(kRam);
  size_t nseg = data[0] % 17;
  bool read_only = data[1] & 1;
  data += 2;
  size -= 2;
  if (size < nseg * 5) return 0;

  DescriptorChain chain;
  bool seen_writable = false;
  for (size_t i = 0; i < nseg; ++i) {
    const uint8_t* d = data + i * 5;
    uint32_t off = (d[0] | d[1] << 8) % kRam;
    uint32_t len = (d[2] | d[3] << 8) % (kRam - off + 1);
    bool w = (d[4] & 1) != 0 || seen_writable;  // the walker guarantees readable-then-writable
    seen_writable = w;
    chain.segments.push_back(ChainSegment{off, std::span<uint8_t>(ram.data() + off, len), w});
    (w ? chain.writable_bytes : chain.readable_bytes) += len;
  }
  chain.descriptors = nseg;
  std::memset(ram.data(), 0, kRam);
  size_t rest = size - nseg * 5;
  std::memcpy(ram.data(), data + nseg * 5, rest < kRam ? rest : kRam);

  BlockLimits limits;
  limits.capacity_sectors = 64;
  limits.read_only = read_only;
  limits.discard = limits.write_zeroes = true;
  limits.max_discard_sectors = limits.max_write_zeroes_sectors = 32;
  limits.max_discard_seg = limits.max_write_zeroes_seg = 4;
  BlockRequest r = parse_block_request(chain, limits);

  auto inside = [](const void* p, size_t n) {
    auto* b = static_cast<const uint8_t*>(p);
    return b >= ram.data() && b + n <= ram.data() + kRam;
  };
  uint64_t total = 0;
  for (const auto& v : r.data) {
    FUZZ_CHECK(inside(v.iov_base, v.iov_len));
    total += v.iov_len;
  }
  if (r.status != nullptr) FUZZ_CHECK(inside(r.status, 1));
  switch (r.op) {
    case BlockRequest::Op::kIn:
    case BlockRequest::Op::kOut:
      FUZZ_CHECK(total == r.len && r.len % 512 == 0);
      FUZZ_CHECK(r.offset / 512 + r.len / 512 <= limits.capacity_sectors);
      FUZZ_CHECK(!(read_only && r.op == BlockRequest::Op::kOut));
      break;
    case BlockRequest::Op::kGetId:
      FUZZ_CHECK(total == 20);
      break;
    case BlockRequest::Op::kDiscard:
    case BlockRequest::Op::kWriteZeroes:
      FUZZ_CHECK(!read_only);
      FUZZ_CHECK(r.ranges.size() <= 4);
      for (const auto& g : r.ranges)
        FUZZ_CHECK(g.offset / 512 + g.len / 512 <= 64 && g.len <= 32 * 512);
      break;
    default:
      break;
  }
  if (r.op != BlockRequest::Op::kNone) FUZZ_CHECK(r.status != nullptr);
  return 0;
}
