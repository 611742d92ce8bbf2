#include "base/key_value_list.h"

#include <gtest/gtest.h>

namespace tern {
namespace {

TEST(KeyValueList, SplitsInOrderAndKeepsEqualsInValues) {
  auto r = split_key_values("path=/a=b,cache=none,serial=", "--disk", "keys: path");
  ASSERT_TRUE(r) << r.error().message();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0].first, "path");
  EXPECT_EQ((*r)[0].second, "/a=b");
  EXPECT_EQ((*r)[2].second, "");
  EXPECT_TRUE(split_key_values("", "--rng", "keys")->empty());
}

TEST(KeyValueList, RefusesItemsThatAreNotKeyValueAndRepeatedKeys) {
  EXPECT_EQ(split_key_values("path=a,,cache=none", "--disk", "keys: path").error().message(),
            "--disk: '' is not key=value (keys: path)");
  EXPECT_EQ(split_key_values("=x", "--disk", "keys: path").error().message(),
            "--disk: '=x' is not key=value (keys: path)");
  EXPECT_EQ(split_key_values("ops=1,ops=2", "--rng", "k").error().message(),
            "--rng ops: given more than once");
  EXPECT_EQ(split_key_values("ops=1,", "--rng", "k").error().message(),
            "--rng: '' is not key=value (k)");
}

}  // namespace
}  // namespace tern
