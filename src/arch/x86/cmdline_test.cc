#include "arch/x86/cmdline.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "arch/x86/layout.h"

namespace tern::x86 {
namespace {

using ::testing::HasSubstr;

TEST(Cmdline, LengthUpToCmdlineSizeIsAccepted) {
  EXPECT_TRUE(validate_cmdline("", 2047));
  EXPECT_TRUE(validate_cmdline(std::string(2047, 'a'), 2047));  // exactly cmdline_size
}

TEST(Cmdline, OneByteOverCmdlineSizeIsRejected) {
  auto r = validate_cmdline(std::string(2048, 'a'), 2047);
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message(), HasSubstr("2048 bytes"));
  EXPECT_THAT(r.error().message(), HasSubstr("cmdline_size of 2047"));
}

TEST(Cmdline, NulInsideIsRejected) {
  auto r = validate_cmdline(std::string("console=ttyS0\0quiet", 20), 2047);
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message(), HasSubstr("NUL byte at offset 13"));
}

TEST(Cmdline, MustLeaveRoomForTheNulInTernsBuffer) {
  const uint32_t huge = 1u << 20;
  EXPECT_TRUE(validate_cmdline(std::string(kCmdlineMaxBytes - 1, 'a'), huge));
  auto r = validate_cmdline(std::string(kCmdlineMaxBytes, 'a'), huge);
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message(), HasSubstr("65536 bytes"));
  EXPECT_THAT(r.error().message(), HasSubstr("65536-byte buffer"));
}

}  // namespace
}  // namespace tern::x86
