// libFuzzer target: virtio-net's guest input without a tap. The first bytes pick the queue size,
// the acked features, the MTU and the fake read lengths; the rest is guest RAM holding the
// descriptor table. Every head is walked (walk_descriptor_chain) and each valid chain goes through
// parse_tx_chain() (the transmitq path), then through RxBuffers::add() (the receiveq path), which
// is fed reads of the fuzzed lengths. Checked: a TX frame is what the chain holds, within the
// size limits, with an accepted header; an RX read never returns more than it took, or more
// bytes than were read into it, and every chain added comes back exactly once.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "base/testing/fuzz_input.h"
#include "virtio/descriptor_chain.h"
#include "virtio/net/rx_buffers.h"
#include "virtio/net/tx_frame.h"
#include "virtio/virtio_spec.h"

namespace {

using namespace tern;
using namespace tern::net;

size_t iov_bytes(const std::vector<iovec>& iov) {
  size_t t = 0;
  for (const auto& v : iov) t += v.iov_len;
  return t;
}

void check_tx(const virtio::DescriptorChain& chain, uint64_t acked, std::vector<iovec>& storage) {
  TxHeaderBytes hdr{};
  auto r = parse_tx_chain(chain, acked, hdr, std::move(storage));
  if (!r) {
    FUZZ_CHECK(!tx_chain_error_name(r.error().error).empty());
    FUZZ_CHECK((r.error().error == TxChainError::kBadHeader) == r.error().header.has_value());
    return;
  }
  FUZZ_CHECK(chain.writable_bytes == 0);
  FUZZ_CHECK(r->bytes == chain.readable_bytes);
  FUZZ_CHECK(r->bytes >= kNetHdrSize + kEthHdrSize && r->bytes <= kMaxFrameSize);
  FUZZ_CHECK(iov_bytes(r->iov) == r->bytes);
  FUZZ_CHECK(r->iov.size() <= chain.segments.size() + 1);
  // The header goes from the checked copy: what is sent is what was checked.
  FUZZ_CHECK(r->iov[0].iov_base == hdr.data() && r->iov[0].iov_len == kNetHdrSize);
  FUZZ_CHECK(decode_net_hdr(hdr) == r->hdr);
  FUZZ_CHECK(!check_tx_header(r->hdr, acked, r->bytes - kNetHdrSize));
  storage = std::move(r->iov);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  testing::quiet_logs();
  testing::FuzzInput in(data, size);
  const uint16_t queue_size = static_cast<uint16_t>(1u << (in.u8() % 9));  // 1..256
  const uint8_t flags = in.u8();
  const uint16_t mtu = in.u16();
  // Acked features from a 32-bit mask over the net feature bits 0..23.
  const uint64_t acked = (in.u32() & 0xffffffu) | virtio::feature(virtio::VIRTIO_F_VERSION_1);
  const bool indirect_ok = flags & 1;
  const bool mergeable = acked & virtio::feature(VIRTIO_NET_F_MRG_RXBUF);
  std::vector<uint32_t> reads(8);
  for (auto& r : reads) r = in.u32();

  // RAM: [0, 64 KiB) from the input (zero-padded; the descriptor table at 0), a hole, then
  // 4 KiB at 1 MiB.
  constexpr size_t kLow = 64 * 1024;
  static std::vector<uint8_t> low(kLow), high(4096);
  std::memset(low.data(), 0, kLow);
  auto rest = in.rest();
  if (!rest.empty())  // an empty span may have a null data()
    std::memcpy(low.data(), rest.data(), rest.size() < kLow ? rest.size() : kLow);
  std::memset(high.data(), 0, high.size());
  auto mem = GuestMemory::wrap(
      {MemoryRegion{0, kLow, low.data(), 0}, MemoryRegion{1 << 20, high.size(), high.data(), 0}});

  static std::vector<iovec> storage;
  RxBuffers rx(mergeable, max_rx_frame(acked, mtu));
  size_t added = 0;
  for (uint16_t head = 0; head < queue_size; ++head) {
    auto chain = virtio::walk_descriptor_chain(mem, 0, queue_size, head, indirect_ok);
    if (!chain) continue;
    check_tx(*chain, acked, storage);
    const uint64_t cap = rx.capacity();
    if (rx.add(std::move(*chain))) {
      ++added;
      FUZZ_CHECK(rx.capacity() > cap);
    } else {
      FUZZ_CHECK(rx.capacity() == cap);
    }
  }
  FUZZ_CHECK(rx.held() == added);

  size_t returned = 0;
  for (uint32_t want : reads) {
    if (rx.held() == 0) break;
    (void)rx.ready(flags & 2);
    const auto& iov = rx.next_read();
    FUZZ_CHECK(!iov.empty() && iov.size() <= 1024);
    FUZZ_CHECK(iov.back().iov_len == kMaxFrameSize);
    const size_t room = iov_bytes(iov);
    const size_t n = want % (room + 1);  // what readv(2) could return
    // The tap writes the bytes read (its 10 header bytes and the frame): simulate it.
    size_t left = n;
    for (const auto& v : iov) {
      const size_t k = left < v.iov_len ? left : v.iov_len;
      std::memset(v.iov_base, 0x5a, k);
      left -= k;
    }
    const size_t held = rx.held();
    const uint64_t cap = rx.capacity();
    RxResult r = rx.complete_read(n);
    FUZZ_CHECK(r.frame_bytes == n);
    if (r.kind != RxResult::Kind::kDelivered) {
      FUZZ_CHECK(r.used.empty() && rx.held() == held && rx.capacity() == cap);
      continue;
    }
    FUZZ_CHECK(n >= kNetHdrSize + kEthHdrSize && n <= room - kMaxFrameSize);
    FUZZ_CHECK(!r.used.empty() && r.used.size() <= held);
    FUZZ_CHECK(mergeable || r.used.size() == 1);
    FUZZ_CHECK(rx.held() == held - r.used.size());
    uint64_t sum = 0;
    for (const auto& u : r.used) {
      FUZZ_CHECK(u.len > 0);
      sum += u.len;
    }
    FUZZ_CHECK(sum == n);
    returned += r.used.size();
  }
  const size_t left = rx.held();
  FUZZ_CHECK(rx.release_all().size() == left);
  FUZZ_CHECK(returned + left == added);
  FUZZ_CHECK(rx.held() == 0 && rx.capacity() == 0);
  return 0;
}
