#include "devices/console/console_output.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

namespace tern {
namespace {

using namespace std::chrono_literals;

struct Pipe {
  UniqueFd r, w;
  Pipe() {
    int fds[2];
    TERN_CHECK(::pipe2(fds, O_CLOEXEC) == 0);
    r.reset(fds[0]);
    w.reset(fds[1]);
  }
};

std::span<const uint8_t> bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

std::string read_some(int fd, size_t max) {
  std::string s(max, '\0');
  ssize_t n = ::read(fd, s.data(), max);
  s.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return s;
}

TEST(ConsoleOutput, WritesQueuedBytesToTheFd) {
  Pipe p;
  auto out = ConsoleOutput::create_for_fd(std::move(p.w));
  out->write(bytes("hello\r\n"));
  out->sink()(bytes("more"));
  EXPECT_TRUE(out->flush(2s));
  EXPECT_EQ(read_some(p.r.get(), 100), "hello\r\nmore");
  EXPECT_EQ(out->stats().bytes_written, 11u);
  EXPECT_EQ(out->stats().bytes_dropped, 0u);
}

TEST(ConsoleOutput, FullBufferDropsAndCountsWithoutBlocking) {
  Pipe p;
  ::fcntl(p.w.get(), F_SETPIPE_SZ, 4096);  // nobody reads: the pipe fills at once
  ConsoleOutputOptions opts;
  opts.capacity = 1024;
  opts.shutdown_timeout = 100ms;
  auto out = ConsoleOutput::create_for_fd(std::move(p.w), opts);
  std::string chunk(256, 'x');
  // Keep writing until the pipe and then the ring are full; no call may wait for the reader.
  auto slowest = std::chrono::steady_clock::duration::zero();
  auto until = std::chrono::steady_clock::now() + 200ms;
  while (std::chrono::steady_clock::now() < until) {
    auto t0 = std::chrono::steady_clock::now();
    out->write(bytes(chunk));
    slowest = std::max(slowest, std::chrono::steady_clock::now() - t0);
    std::this_thread::sleep_for(100us);
  }
  EXPECT_LT(slowest, 100ms);
  EXPECT_FALSE(out->flush(50ms));
  auto st = out->stats();
  EXPECT_GT(st.bytes_written, 0u);
  EXPECT_LE(st.bytes_written, 4096u);
  EXPECT_GT(st.bytes_dropped, 0u);
  auto start = std::chrono::steady_clock::now();
  out.reset();  // the writer is stuck on a full pipe: destruction is still bounded
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
}

TEST(ConsoleOutput, ClosedReaderIsAnErrorNotSigpipe) {
  Pipe p;
  p.r.reset();
  auto out = ConsoleOutput::create_for_fd(std::move(p.w));
  out->write(bytes("lost"));
  EXPECT_TRUE(out->flush(2s));
  EXPECT_GE(out->stats().write_errors, 1u);
  EXPECT_EQ(out->stats().bytes_dropped, 4u);
}

TEST(ConsoleOutput, FileTargetIsCreatedAndTruncated) {
  char dir_template[] = "/tmp/tern-console-XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  std::string path = std::string(dir_template) + "/console.log";
  {
    auto out = ConsoleOutput::create(*ConsoleTarget::parse("file:" + path));
    ASSERT_TRUE(out) << out.error().message();
    (*out)->write(bytes("first run, longer text\n"));
  }
  {
    auto out = ConsoleOutput::create(*ConsoleTarget::parse("file:" + path));
    ASSERT_TRUE(out);
    (*out)->write(bytes("second\n"));
  }  // destructor drains
  auto content = read_file(path, 1024);
  ASSERT_TRUE(content);
  EXPECT_EQ(*content, "second\n");
  ::unlink(path.c_str());
  ::rmdir(dir_template);
}

TEST(ConsoleOutput, UnopenableFileNamesThePath) {
  auto out = ConsoleOutput::create(*ConsoleTarget::parse("file:/nonexistent-dir/x/console.log"));
  ASSERT_FALSE(out);
  EXPECT_NE(out.error().message().find("/nonexistent-dir/x/console.log"), std::string::npos);
}

}  // namespace
}  // namespace tern
