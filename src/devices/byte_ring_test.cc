#include "devices/byte_ring.h"

#include <gtest/gtest.h>

#include <array>
#include <vector>

namespace tern {
namespace {

TEST(ByteRing, PushPopWrapsAround) {
  ByteRing r(4);
  std::array<uint8_t, 3> a{1, 2, 3};
  EXPECT_EQ(r.push(a), 3u);
  EXPECT_EQ(r.pop_front(), 1);
  EXPECT_EQ(r.pop_front(), 2);
  std::array<uint8_t, 3> b{4, 5, 6};
  EXPECT_EQ(r.push(b), 3u);  // wraps
  EXPECT_EQ(r.free(), 0u);
  std::array<uint8_t, 8> out{};
  EXPECT_EQ(r.pop(out), 4u);
  EXPECT_EQ((std::vector<uint8_t>(out.begin(), out.begin() + 4)),
            (std::vector<uint8_t>{3, 4, 5, 6}));
  EXPECT_TRUE(r.empty());
}

TEST(ByteRing, PushStoresOnlyWhatFits) {
  ByteRing r(2);
  std::array<uint8_t, 5> a{1, 2, 3, 4, 5};
  EXPECT_EQ(r.push(a), 2u);
  EXPECT_FALSE(r.push(uint8_t{9}));
  r.clear();
  EXPECT_TRUE(r.push(uint8_t{9}));
  EXPECT_EQ(r.size(), 1u);
}

}  // namespace
}  // namespace tern
