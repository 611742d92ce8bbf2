// Bus accounting: claimed accesses per range (reads, writes, time), unclaimed per address.
#include <gtest/gtest.h>

#include "bus/bus.h"

namespace tern {
namespace {

class Dev : public BusDevice {
 public:
  explicit Dev(std::string n) : name_(std::move(n)) {}
  std::string_view name() const override { return name_; }
  void read(uint64_t, std::span<uint8_t> d) override { std::fill(d.begin(), d.end(), 0); }
  void write(uint64_t, std::span<const uint8_t>) override {}

 private:
  std::string name_;
};

TEST(BusAccounting, CountsPerRangeAndUnclaimedPerAddress) {
  Bus bus("pio");
  auto a = std::make_shared<Dev>("a");
  ASSERT_TRUE(bus.insert(a, 0x60, 1));
  ASSERT_TRUE(bus.insert(a, 0x64, 1));  // one device, two ranges: counted apart
  ASSERT_TRUE(bus.insert(std::make_shared<Dev>("b"), 0x3f8, 8));
  uint8_t byte = 0;
  std::span<uint8_t> d(&byte, 1);
  EXPECT_EQ(bus.read(0x60, d), a.get());
  EXPECT_EQ(bus.write(0x64, d), a.get());
  EXPECT_EQ(bus.write(0x64, d), a.get());
  for (int i = 0; i < 5; ++i) bus.write(0x3ff, d);
  EXPECT_EQ(bus.read(0x510, d), nullptr);
  EXPECT_EQ(bus.write(0x511, d), nullptr);
  EXPECT_EQ(bus.write(0x511, d), nullptr);

  auto r = bus.range_stats();
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].device, "a");
  EXPECT_EQ(r[0].base, 0x60u);
  EXPECT_EQ(r[0].reads, 1u);
  EXPECT_EQ(r[0].writes, 0u);
  EXPECT_EQ(r[1].base, 0x64u);
  EXPECT_EQ(r[1].writes, 2u);
  EXPECT_EQ(r[2].device, "b");
  EXPECT_EQ(r[2].len, 8u);
  EXPECT_EQ(r[2].writes, 5u);

  auto u = bus.unclaimed().snapshot();
  ASSERT_EQ(u.rows.size(), 2u);
  EXPECT_EQ(u.rows[0].addr, 0x511u);
  EXPECT_EQ(u.rows[0].writes, 2u);
  EXPECT_EQ(u.rows[1].addr, 0x510u);
  EXPECT_EQ(u.rows[1].reads, 1u);
  EXPECT_EQ(bus.unclaimed_reads(), 1u);
  EXPECT_EQ(bus.unclaimed_writes(), 2u);
}

}  // namespace
}  // namespace tern
