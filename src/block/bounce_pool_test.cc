#include "block/bounce_pool.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace tern {
namespace {

TEST(BouncePool, NeverHoldsMoreThanItsBudget) {
  BouncePool pool(4096, 64 * 1024, 3);
  EXPECT_EQ(pool.budget_bytes(), 3u * 64 * 1024);
  EXPECT_EQ(pool.allocated_bytes(), 0u);  // nothing until first use
  uint8_t* a = pool.acquire();
  uint8_t* b = pool.acquire();
  uint8_t* c = pool.acquire();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_NE(c, nullptr);
  for (uint8_t* p : {a, b, c}) EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 0u);
  EXPECT_EQ(pool.acquire(), nullptr);  // spent: the caller waits
  EXPECT_EQ(pool.in_use(), 3u);
  pool.release(b);
  EXPECT_EQ(pool.acquire(), b);  // reused, not reallocated
  EXPECT_EQ(pool.allocated_bytes(), pool.budget_bytes());
  pool.release(a);
  pool.release(b);
  pool.release(c);
  EXPECT_EQ(pool.in_use(), 0u);
  EXPECT_EQ(pool.allocated_bytes(), pool.budget_bytes());  // kept for the next request
}

}  // namespace
}  // namespace tern
