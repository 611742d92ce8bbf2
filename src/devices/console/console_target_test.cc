#include "devices/console/console_target.h"

#include <gtest/gtest.h>

#include <string>

namespace tern {
namespace {

TEST(ConsoleTarget, ParsesStdioAndFile) {
  auto s = ConsoleTarget::parse("stdio");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->kind, ConsoleTarget::Kind::kStdio);
  auto f = ConsoleTarget::parse("file:/tmp/con sole.log");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->kind, ConsoleTarget::Kind::kFile);
  EXPECT_EQ(f->path, "/tmp/con sole.log");
  EXPECT_EQ(f->to_string(), "file:/tmp/con sole.log");
  auto again = ConsoleTarget::parse(f->to_string());
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, *f);
}

TEST(ConsoleTarget, RejectsOtherSpecsNamingTheField) {
  for (std::string bad :
       {std::string(), std::string("tty"), std::string("file:"), std::string("FILE:/x"),
        std::string("stdio "), std::string("file:a\0b", 8)}) {
    auto r = ConsoleTarget::parse(bad, "console");
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().op, "console");
    EXPECT_NE(r.error().message().find("console"), std::string::npos);
  }
  EXPECT_EQ(ConsoleTarget::parse("x").error().op, "--console");
}

}  // namespace
}  // namespace tern
