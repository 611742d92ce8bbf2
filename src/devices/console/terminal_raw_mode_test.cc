#include "devices/console/terminal_raw_mode.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <optional>

namespace tern {
namespace {

class TerminalRawModeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    master_.reset(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
    ASSERT_TRUE(master_.valid());
    ASSERT_EQ(::grantpt(master_.get()), 0);
    ASSERT_EQ(::unlockpt(master_.get()), 0);
    auto s = open_file(::ptsname(master_.get()), O_RDWR | O_NOCTTY);
    ASSERT_TRUE(s);
    slave_ = std::move(*s);
  }
  tcflag_t lflag() {
    termios t{};
    TERN_CHECK(::tcgetattr(slave_.get(), &t) == 0);
    return t.c_lflag;
  }
  UniqueFd master_, slave_;
};

TEST_F(TerminalRawModeTest, EntersAndRestores) {
  {
    auto raw = TerminalRawMode::enter(slave_.borrow());
    ASSERT_TRUE(raw) << raw.error().message();
    EXPECT_EQ(lflag() & (ICANON | ECHO | ISIG), 0u);
    EXPECT_FALSE(TerminalRawMode::enter(slave_.borrow()));  // one at a time
    TerminalRawMode moved = std::move(*raw);
    EXPECT_TRUE(moved.active());
    EXPECT_FALSE(raw->active());
  }
  EXPECT_NE(lflag() & ICANON, 0u);
  auto again = TerminalRawMode::enter(slave_.borrow(), /*keep_signals=*/true);
  ASSERT_TRUE(again);
  EXPECT_NE(lflag() & ISIG, 0u);
  EXPECT_EQ(lflag() & ICANON, 0u);
}

TEST_F(TerminalRawModeTest, SignalHandlerRestoreWorksAndIsHarmlessAfterwards) {
  restore_terminal_from_signal_handler();  // nothing active: no-op
  auto raw = TerminalRawMode::enter(slave_.borrow());
  ASSERT_TRUE(raw);
  restore_terminal_from_signal_handler();
  EXPECT_NE(lflag() & ICANON, 0u);
  raw->restore();
  EXPECT_NE(lflag() & ICANON, 0u);
}

TEST_F(TerminalRawModeTest, RejectsNonTerminals) {
  auto null = open_file("/dev/null", O_RDONLY);
  ASSERT_TRUE(null);
  EXPECT_FALSE(TerminalRawMode::enter(null->borrow()));
}

}  // namespace
}  // namespace tern
