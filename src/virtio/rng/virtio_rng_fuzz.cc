// libFuzzer target: a driver posting arbitrary chains to virtio-rng. The first bytes pick the
// queue size, the features and an optional bandwidth limit (fixed fake clock, so it throttles);
// flag 8 adds an operations limit, 16 a huge burst, 32 a resume/re-park and a re-activation at
// the parked position; the rest is guest RAM holding the descriptor table and the available
// ring. The device is
// activated (its worker serves the ring at once), then quiesced: nothing may crash or hang, and
// every chain the device took must have come back through the used ring (or the queue is broken).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "base/testing/fuzz_input.h"
#include "virtio/rng/virtio_rng_device.h"
#include "virtio/testing/fake_virtqueue_driver.h"
#include "virtio/virtio_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tern;
  using namespace tern::virtio;
  testing::quiet_logs();
  testing::FuzzInput in(data, size);
  const uint16_t queue_size = static_cast<uint16_t>(1u << (in.u8() % 9));  // 1..256
  uint8_t flags = in.u8();
  uint16_t limit = in.u16();
  uint64_t features = feature(VIRTIO_F_VERSION_1);
  if (flags & 1) features |= feature(VIRTIO_F_INDIRECT_DESC);
  if (flags & 2) features |= feature(VIRTIO_F_EVENT_IDX);
  RngConfig cfg;
  // flags & 16: a one_time_burst near 2^64 (token arithmetic must saturate, not wrap).
  const uint64_t burst = (flags & 16) ? UINT64_MAX - limit : 0;
  if (flags & 4) cfg.rate_limiter.bandwidth = TokenBucketConfig{uint64_t{limit} + 1, burst, 1000};
  // flags & 8: an operations bucket of 1..4 requests per millisecond.
  if (flags & 8) cfg.rate_limiter.ops = TokenBucketConfig{uint64_t{limit % 4u} + 1, 0, 1};

  // RAM: [0, 64 KiB) from the input (zero-padded), a hole, then 4 KiB at 1 MiB.
  constexpr size_t kLow = 64 * 1024;
  static std::vector<uint8_t> low(kLow), high(4096);
  std::memset(low.data(), 0, kLow);
  auto rest = in.rest();
  if (!rest.empty()) std::memcpy(low.data(), rest.data(), rest.size() < kLow ? rest.size() : kLow);
  std::memset(high.data(), 0, high.size());
  auto mem = GuestMemory::wrap(
      {MemoryRegion{0, kLow, low.data(), 0}, MemoryRegion{1 << 20, high.size(), high.data(), 0}});

  VirtqueueConfig q;
  q.size = queue_size;
  q.desc_gpa = 0;
  q.avail_gpa = 0x4000;
  q.used_gpa = 0x6000;
  q.enabled = true;
  auto dev = VirtioRng::create(cfg, "virtio-rng0", [] { return uint64_t{0}; });
  FUZZ_CHECK(dev.has_value());
  auto kick = make_eventfd(0, 0);
  FUZZ_CHECK(kick.has_value());
  std::vector<UniqueFd> kicks;
  kicks.push_back(std::move(*kick));
  auto irq = std::make_shared<testing::FakeVirtioInterrupt>();
  auto kick_dup = make_eventfd(0, 0);  // kept for the re-activation below
  FUZZ_CHECK(kick_dup.has_value());
  if (!(*dev)->activate(mem, features, {q}, std::move(kicks), irq)) return 0;
  // The worker starts serving what is available at once; the quiesce below parks it after it
  // took all of it or, when the pause request came first, part of it (a pause cuts the worker's
  // pass short): either way every chain it took has come back.
  (*dev)->quiesce();
  QueuePosition pos = (*dev)->queue_positions()[0];
  DeviceCounters c = (*dev)->counters();
  if (!irq->needs_reset()) {
    FUZZ_CHECK(pos.next_used == pos.next_avail);
    FUZZ_CHECK(c.queues[0].requests == pos.next_avail);
  }
  // A huge burst (and no operations limit) never throttles: the fixed clock never refills, so
  // only the burst can serve every chain.
  if ((flags & 4) && (flags & 16) && !(flags & 8)) {
    for (const auto& [n, v] : c.counters)
      if (n == "throttled") FUZZ_CHECK(v == 0);
  }
  if (flags & 32) {
    // Resume, park again: the worker takes what the first park left on the ring (nothing, or the
    // rest of a pass the pause cut short), and again every chain taken has come back, the
    // position never behind the first; then reset and re-activate at that position (a restore)
    // and park once more.
    (*dev)->unquiesce();
    (*dev)->quiesce();
    const QueuePosition again_pos = (*dev)->queue_positions()[0];
    if (!irq->needs_reset()) {
      FUZZ_CHECK(again_pos.next_used == again_pos.next_avail);
      FUZZ_CHECK(static_cast<uint16_t>(again_pos.next_avail - pos.next_avail) <= queue_size);
    }
    pos = again_pos;
    (*dev)->reset();
    if (!irq->needs_reset()) {
      std::vector<UniqueFd> again;
      again.push_back(std::move(*kick_dup));
      q.position = pos;
      if ((*dev)->activate(mem, features, {q}, std::move(again), irq)) {
        (*dev)->quiesce();
        QueuePosition p2 = (*dev)->queue_positions()[0];
        if (!irq->needs_reset()) FUZZ_CHECK(p2.next_used == p2.next_avail);
      }
    }
  }
  (*dev)->reset();
  return 0;
}
