// check_vring_base: a GET_VRING_BASE answer is a position in the ring's window or refused by name.
#include "vhost_user/frontend/frontend_setup.h"

#include <gtest/gtest.h>

namespace tern::vhost_user {
namespace {

std::string error_of(const Result<uint16_t>& r) {
  return r ? "" : r.error().message();
}

TEST(CheckVringBase, AnswersBetweenTheUsedAndTheAvailableIdxAreTheirOwnValue) {
  EXPECT_EQ(check_vring_base(5, 0, 256, 5, 7).value(), 5);  // nothing in flight
  EXPECT_EQ(check_vring_base(7, 0, 256, 5, 7).value(), 7);  // all taken
  EXPECT_EQ(check_vring_base(6, 0, 256, 5, 7).value(), 6);
  // Across the 16-bit wrap: used 65534, avail 2.
  EXPECT_EQ(check_vring_base(0, 0, 256, 65534, 2).value(), 0);
  EXPECT_EQ(check_vring_base(65535, 0, 256, 65534, 2).value(), 65535);
}

TEST(CheckVringBase, AnswersOutsideTheIndexSpaceAreRefusedNamingTheVringAndValue) {
  EXPECT_EQ(error_of(check_vring_base(0x10006, 1, 256, 5, 7)),
            "vhost-user: GET_VRING_BASE of vring 1 answered 65542: outside the split ring's "
            "16-bit index space");
  EXPECT_FALSE(check_vring_base(0xffffffff, 0, 256, 5, 7));
}

TEST(CheckVringBase, AnswersOutsideTheRingsWindowAreRefused) {
  EXPECT_EQ(error_of(check_vring_base(8, 0, 256, 5, 7)),
            "vhost-user: GET_VRING_BASE of vring 0 answered 8: not between the used ring's idx 5 "
            "and the available ring's idx 7 (at most 256 ahead of used)");
  EXPECT_FALSE(check_vring_base(4, 0, 256, 5, 7));      // behind what it completed
  EXPECT_FALSE(check_vring_base(3, 0, 256, 65534, 2));  // past avail across the wrap
  // A driver's avail idx far ahead (hostile or garbage): still at most a ring's worth in flight.
  EXPECT_TRUE(check_vring_base(5 + 256, 0, 256, 5, 60000));
  EXPECT_FALSE(check_vring_base(5 + 257, 0, 256, 5, 60000));
}

}  // namespace
}  // namespace tern::vhost_user
