#include "devices/console/console_output.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "base/testing/eventually.h"

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

// A reader that never reads: writes keep returning (a write that waited for the reader would
// hang this test: there is none) and what does not fit is dropped and counted; destruction gives
// up on the stuck pipe and closes it. Conditions and outcomes only, no timing thresholds.
TEST(ConsoleOutput, FullBufferDropsAndCountsWithoutBlocking) {
  Pipe p;
  ::fcntl(p.w.get(), F_SETPIPE_SZ, 4096);  // nobody reads: the pipe fills at once
  ConsoleOutputOptions opts;
  opts.capacity = 1024;
  opts.shutdown_timeout = 100ms;
  auto out = ConsoleOutput::create_for_fd(std::move(p.w), opts);
  std::string chunk(256, 'x');
  // Keep writing until the pipe and then the ring are full and a write is dropped.
  uint64_t offered = 0;
  ASSERT_TRUE(testing::eventually([&] {
    out->write(bytes(chunk));
    offered += chunk.size();
    return out->stats().bytes_dropped > 0;
  }));
  EXPECT_FALSE(out->flush(50ms));  // the pipe never drains: the ring cannot empty
  auto st = out->stats();
  EXPECT_GT(st.bytes_written, 0u);
  EXPECT_LE(st.bytes_written, 4096u);
  EXPECT_LE(st.bytes_written + st.bytes_dropped, offered);
  out.reset();  // the writer is stuck on a full pipe: destruction still ends, closing the pipe
  std::string all;
  for (std::string got; !(got = read_some(p.r.get(), 65536)).empty();) all += got;  // up to EOF
  EXPECT_GE(all.size(), st.bytes_written);  // the writer may have topped the pipe up since
  EXPECT_LE(all.size(), 4096u);
  EXPECT_EQ(all, std::string(all.size(), 'x'));
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
