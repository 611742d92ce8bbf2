#include "base/printable.h"

#include <gtest/gtest.h>

namespace tern {
namespace {

TEST(Printable, EscapesControlBytesBackslashAndHighBytes) {
  EXPECT_EQ(printable("virtio-blk"), "virtio-blk");
  EXPECT_EQ(printable(std::string("a\x1b[2J\n\\\xff", 8)), "a\\x1b[2J\\x0a\\x5c\\xff");
  EXPECT_EQ(printable(std::string("\0", 1)), "\\x00");
}

}  // namespace
}  // namespace tern
