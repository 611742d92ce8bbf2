#include "base/size.h"

#include "base/checked.h"

#include <gtest/gtest.h>

namespace tern {
namespace {

TEST(ParseSize, SuffixesAndDefaults) {
  EXPECT_EQ(*parse_size("512M", "--memory"), 512 * MiB);
  EXPECT_EQ(*parse_size("2G", "--memory"), 2 * GiB);
  EXPECT_EQ(*parse_size("3328m", "--memory"), 3328 * MiB);
  EXPECT_EQ(*parse_size("64KiB", "--memory"), 64 * KiB);
  EXPECT_EQ(*parse_size("1024", "--memory"), 1024 * MiB);  // bare number: MiB, like QEMU -m
}

TEST(ParseSize, RejectsMalformedWithFieldName) {
  for (const char* s : {"", "M", "12X", "1.5G", "-1G", "0", "0M", "99999999999999999999T", " 1G"}) {
    auto r = parse_size(s, "--memory");
    ASSERT_FALSE(r) << s;
    EXPECT_NE(r.error().message().find("--memory"), std::string::npos) << r.error().message();
  }
}

TEST(FormatSize, Readable) {
  EXPECT_EQ(format_size(512 * MiB), "512 MiB");
  EXPECT_EQ(format_size(3328 * MiB), "3.25 GiB");
  EXPECT_EQ(format_size(17), "17 bytes");
}

}  // namespace
}  // namespace tern
