// libFuzzer target: a driver posting arbitrary chains to virtio-rng. The first bytes pick the
// queue size, the features and an optional bandwidth limit (fixed fake clock, so it throttles);
// the rest is guest RAM holding the descriptor table and the available ring. The device is
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
  if (flags & 4) cfg.rate_limiter.bandwidth = TokenBucketConfig{uint64_t{limit} + 1, 0, 1000};

  // RAM: [0, 64 KiB) from the input (zero-padded), a hole, then 4 KiB at 1 MiB.
  constexpr size_t kLow = 64 * 1024;
  static std::vector<uint8_t> low(kLow), high(4096);
  std::memset(low.data(), 0, kLow);
  auto rest = in.rest();
  std::memcpy(low.data(), rest.data(), rest.size() < kLow ? rest.size() : kLow);
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
  if (!(*dev)->activate(mem, features, {q}, std::move(kicks), irq)) return 0;
  // The worker serves what is available before it looks at its epoll, so the quiesce below
  // parks it after that pass.
  (*dev)->quiesce();
  QueuePosition pos = (*dev)->queue_positions()[0];
  DeviceCounters c = (*dev)->counters();
  if (!irq->needs_reset()) {
    FUZZ_CHECK(pos.next_used == pos.next_avail);
    FUZZ_CHECK(c.queues[0].requests == pos.next_avail);
  }
  (*dev)->reset();
  return 0;
}
