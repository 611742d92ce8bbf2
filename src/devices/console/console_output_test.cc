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

// Bytes that come one at a time (a UART's THR) are gathered and written together: the writer,
// woken by the first, waits up to `linger` (here an hour: only flush() can end it) for more.
TEST(ConsoleOutput, GathersSingleBytesIntoOneWrite) {
  Pipe p;
  ConsoleOutputOptions opts;
  opts.linger = std::chrono::hours(1);
  auto out = ConsoleOutput::create_for_fd(std::move(p.w), opts);
  for (char c : std::string("boot: ok\r\n")) out->write(bytes(std::string(1, c)));
  EXPECT_TRUE(out->flush(60s));  // ends the linger at once
  EXPECT_EQ(read_some(p.r.get(), 100), "boot: ok\r\n");
  EXPECT_EQ(out->stats().writes, 1u);
  EXPECT_EQ(out->stats().bytes_written, 10u);
}

// Shutdown ends the linger too: what is queued is written, not held for `linger`.
TEST(ConsoleOutput, DestructionWritesWhatALingeringWriterHolds) {
  Pipe p;
  ConsoleOutputOptions opts;
  opts.linger = std::chrono::hours(1);
  auto out = ConsoleOutput::create_for_fd(std::move(p.w), opts);
  out->write(bytes("x"));
  out->write(bytes("yz"));
  out.reset();
  EXPECT_EQ(read_some(p.r.get(), 100), "xyz");
}

// A reader that never reads, the pipe already full: writes keep returning (a write that waited
// for the absent reader would hang this test: there is none), what does not fit the ring is
// dropped and counted, and destruction gives up on the stuck pipe and closes it. Conditions and
// outcomes only, no timing thresholds.
TEST(ConsoleOutput, FullBufferDropsAndCountsWithoutBlocking) {
  Pipe p;
  ::fcntl(p.w.get(), F_SETPIPE_SZ, 4096);
  // Fill the pipe before the console gets it, so its writer can never write a byte.
  const int flags = ::fcntl(p.w.get(), F_GETFL);
  ASSERT_EQ(::fcntl(p.w.get(), F_SETFL, flags | O_NONBLOCK), 0);
  size_t prefilled = 0;
  for (ssize_t n; (n = ::write(p.w.get(), "pppppppppppppppp", 16)) > 0;) prefilled += static_cast<size_t>(n);
  ASSERT_EQ(errno, EAGAIN);
  ASSERT_EQ(::fcntl(p.w.get(), F_SETFL, flags), 0);
  ConsoleOutputOptions opts;
  opts.capacity = 1024;
  opts.shutdown_timeout = 100ms;
  auto out = ConsoleOutput::create_for_fd(std::move(p.w), opts);
  std::string chunk(256, 'x');
  // Keep writing until the ring is full and a write is dropped.
  uint64_t offered = 0;
  ASSERT_TRUE(testing::eventually([&] {
    out->write(bytes(chunk));
    offered += chunk.size();
    return out->stats().bytes_dropped > 0;
  }));
  EXPECT_FALSE(out->flush(50ms));  // the pipe never drains: the ring cannot empty
  auto st = out->stats();
  EXPECT_EQ(st.bytes_written, 0u);
  EXPECT_LT(st.bytes_dropped, offered);  // what the ring (and the writer's chunk) took is not lost yet
  out.reset();  // the writer is stuck on a full pipe: destruction still ends, closing the pipe
  std::string all;
  for (std::string got; !(got = read_some(p.r.get(), 65536)).empty();) all += got;  // up to EOF
  EXPECT_EQ(all, std::string(prefilled, 'p'));
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
