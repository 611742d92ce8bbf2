// Unit tests: the machine section round-trips and refuses out-of-range values naming them.
#include "snapshot/machine_state.h"

#include <gtest/gtest.h>

namespace tern::snap {
namespace {

MachineState sample() {
  MachineState m;
  m.memory_bytes = 512ull << 20;
  m.vcpus = 2;
  m.cmdline = "console=ttyS0 quiet";
  SavedDisk d;
  d.config.path = "/var/lib/tern/disk.img";
  d.config.cache = CacheMode::kNone;
  d.config.read_only = true;
  d.config.serial = "disk0";
  d.config.queues = 2;
  d.config.engine = IoEngineKind::kThreads;
  d.size_bytes = 1ull << 30;
  m.disks.push_back(d);
  return m;
}

std::vector<uint8_t> encoded(const MachineState& m) {
  ByteWriter w;
  encode_machine_state(w, m);
  return w.take();
}

TEST(MachineState, RoundTrip) {
  auto bytes = encoded(sample());
  ByteReader r(bytes, "machine");
  auto m = decode_machine_state(r);
  ASSERT_TRUE(m) << m.error().message();
  EXPECT_EQ(m->memory_bytes, 512ull << 20);
  EXPECT_EQ(m->vcpus, 2u);
  EXPECT_EQ(m->cmdline, "console=ttyS0 quiet");
  ASSERT_EQ(m->disks.size(), 1u);
  EXPECT_EQ(m->disks[0].config.path, "/var/lib/tern/disk.img");
  EXPECT_EQ(m->disks[0].config.cache, CacheMode::kNone);
  EXPECT_TRUE(m->disks[0].config.read_only);
  EXPECT_EQ(m->disks[0].config.serial, "disk0");
  EXPECT_EQ(m->disks[0].config.queues, 2);
  EXPECT_EQ(m->disks[0].config.engine, IoEngineKind::kThreads);
  EXPECT_EQ(m->disks[0].size_bytes, 1ull << 30);
  EXPECT_EQ(encoded(*m), bytes);
}

TEST(MachineState, EveryTruncationFails) {
  auto bytes = encoded(sample());
  for (size_t n = 0; n < bytes.size(); ++n) {
    ByteReader r(std::span<const uint8_t>(bytes).first(n), "machine");
    EXPECT_FALSE(decode_machine_state(r)) << n;
  }
}

TEST(MachineState, RefusesBadValues) {
  auto check = [](MachineState m, const std::string& want) {
    auto bytes = encoded(m);
    ByteReader r(bytes, "machine");
    auto d = decode_machine_state(r);
    ASSERT_FALSE(d);
    EXPECT_NE(d.error().message().find(want), std::string::npos) << d.error().message();
  };
  MachineState m = sample();
  m.memory_bytes = 12345;
  check(m, "memory size 12345 is invalid");
  m = sample();
  m.vcpus = 0;
  check(m, "vCPU count 0 is invalid");
  m = sample();
  m.disks[0].config.queues = 0;
  check(m, "disk 0");
  auto bytes = encoded(sample());
  bytes.push_back(0);
  ByteReader r(bytes, "machine");
  auto d = decode_machine_state(r);
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message().find("trailing"), std::string::npos);
}

}  // namespace
}  // namespace tern::snap
