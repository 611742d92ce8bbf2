#include "devices/console/console_input.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <termios.h>
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <string>
#include <thread>

#include "base/testing/eventually.h"

namespace tern {
namespace {

using testing::eventually;

using namespace std::chrono_literals;

// An InputSink with a fixed capacity, drained by the test (the "guest").
class FakeSink : public InputSink {
 public:
  explicit FakeSink(size_t capacity) : capacity_(capacity) {}
  size_t input_space() override {
    std::lock_guard lock(mu_);
    return capacity_ - pending_.size();
  }
  size_t enqueue_input(std::span<const uint8_t> b) override {
    std::lock_guard lock(mu_);
    size_t n = std::min(b.size(), capacity_ - pending_.size());
    pending_.append(b.begin(), b.begin() + static_cast<ptrdiff_t>(n));
    dropped_ += b.size() - n;
    return n;
  }
  std::string drain() {
    std::lock_guard lock(mu_);
    return std::exchange(pending_, {});
  }
  size_t dropped() {
    std::lock_guard lock(mu_);
    return dropped_;
  }

 private:
  std::mutex mu_;
  size_t capacity_;
  std::string pending_;
  size_t dropped_ = 0;
};

struct Pipe {
  UniqueFd r, w;
  Pipe() {
    int fds[2];
    TERN_CHECK(::pipe2(fds, O_CLOEXEC) == 0);
    r.reset(fds[0]);
    w.reset(fds[1]);
  }
  void send(const std::string& s) const {
    TERN_CHECK(::write(w.get(), s.data(), s.size()) == static_cast<ssize_t>(s.size()));
  }
};

TEST(ConsoleInput, FeedsPipeInputAndStopsAtEof) {
  Pipe p;
  FakeSink sink(4096);
  auto in = ConsoleInput::create(p.r.borrow(), sink);
  ASSERT_TRUE(in) << in.error().message();
  EXPECT_FALSE((*in)->is_terminal());
  p.send("ls\n");
  std::string got;
  EXPECT_TRUE(eventually([&] { return (got += sink.drain()) == "ls\n"; }));
  p.w.reset();  // EOF
  EXPECT_TRUE(eventually([&] { return (*in)->finished(); }));
  EXPECT_EQ((*in)->bytes_read(), 3u);
}

TEST(ConsoleInput, StopsPromptlyWithoutInput) {
  Pipe p;  // write end stays open: no data, no EOF
  FakeSink sink(16);
  auto in = ConsoleInput::create(p.r.borrow(), sink);
  ASSERT_TRUE(in);
  (*in)->stop();  // returns without input or EOF (a reader waiting for either hangs the test)
  EXPECT_TRUE((*in)->finished());
  EXPECT_EQ((*in)->bytes_read(), 0u);
  in->reset();
}

TEST(ConsoleInput, FullSinkMeansBackpressureNotLoss) {
  Pipe p;
  FakeSink sink(4);
  auto in = ConsoleInput::create(p.r.borrow(), sink);
  ASSERT_TRUE(in);
  p.send("0123456789");
  std::string got;
  EXPECT_TRUE(eventually([&] {
    got += sink.drain();  // the guest reads slowly, 4 bytes at a time at most
    return got.size() == 10;
  }));
  EXPECT_EQ(got, "0123456789");
  EXPECT_EQ(sink.dropped(), 0u);
}

TEST(ConsoleInput, RejectsAClosedFd) {
  FakeSink sink(4);
  EXPECT_FALSE(ConsoleInput::create(BorrowedFd(-1), sink));
}

TEST(ConsoleInput, TerminalIsRawWhileReadingAndRestoredAfter) {
  int master = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  ASSERT_GE(master, 0);
  UniqueFd m(master);
  ASSERT_EQ(::grantpt(master), 0);
  ASSERT_EQ(::unlockpt(master), 0);
  auto slave = open_file(::ptsname(master), O_RDWR | O_NOCTTY);
  ASSERT_TRUE(slave);
  FakeSink sink(64);
  {
    auto in = ConsoleInput::create(slave->borrow(), sink);
    ASSERT_TRUE(in) << in.error().message();
    EXPECT_TRUE((*in)->is_terminal());
    termios t{};
    ASSERT_EQ(::tcgetattr(slave->get(), &t), 0);
    EXPECT_EQ(t.c_lflag & (ICANON | ECHO | ISIG), 0u);
    ASSERT_EQ(::write(master, "a\x03", 2), 2);  // Ctrl-C reaches the guest as a byte
    std::string got;
    EXPECT_TRUE(eventually([&] { return (got += sink.drain()) == "a\x03"; }));
  }
  termios t{};
  ASSERT_EQ(::tcgetattr(slave->get(), &t), 0);
  EXPECT_NE(t.c_lflag & ICANON, 0u);
}

}  // namespace
}  // namespace tern
