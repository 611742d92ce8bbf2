// `tern stat --all` (the binary) over two fake terns (API servers answering GET /tern/stats with
// growing snapshots, no KVM) found in a socket directory, plus a socket nobody listens on and a
// missing --api-sock: one line per VM with the socket's name, the dead ones as "error:" lines that
// do not stop the others.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "api/api_server.h"
#include "base/clock.h"
#include "stats/stats_test_snapshot.h"
#include "tests/cli/spawn_tern.h"

namespace tern {
namespace {

namespace fs = std::filesystem;

class StatAll : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tern-stat-all-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    for (auto& s : servers_) s->shutdown();
    for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);  // ends an accept() of a thread below
    for (auto& t : threads_) t.join();
    for (int fd : fds_) ::close(fd);
    fs::remove_all(dir_);
  }
  /// A fake tern at dir/<name>.sock: each GET /tern/stats is a later snapshot (counters × k).
  void serve(const std::string& name, uint64_t scale) {
    auto reads = std::make_shared<std::atomic<uint64_t>>(0);
    auto server = ApiServer::start(
        (dir_ / (name + ".sock")).string(),
        [reads, scale](ApiRequest req, std::function<void(ApiResponse)> reply) {
          if (!std::holds_alternative<api::GetStats>(req)) return reply(ApiResponse::json(nlohmann::json::object(), 400));
          reply(ApiResponse::json(testing::stats_snapshot(monotonic_ns(), scale * ++*reads)));
        },
        events_);
    ASSERT_TRUE(server) << server.error().message();
    servers_.push_back(std::move(*server));
  }
  /// A socket file nobody listens on (a tern that died without removing it).
  void dead_socket(const std::string& name) {
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::string p = (dir_ / (name + ".sock")).string();
    std::strncpy(a.sun_path, p.c_str(), sizeof a.sun_path - 1);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << std::strerror(errno);
    ::close(fd);
  }
  /// A socket at dir/<name>.sock listening with `backlog`; returns its fd (closed at TearDown).
  int listener(const std::string& name, int backlog) {
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::string p = (dir_ / (name + ".sock")).string();
    std::strncpy(a.sun_path, p.c_str(), sizeof a.sun_path - 1);
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << std::strerror(errno);
    EXPECT_EQ(::listen(fd, backlog), 0) << std::strerror(errno);
    fds_.push_back(fd);
    if (backlog == 0) {  // fill the backlog: a connect(2) more would wait for an accept
      int c = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      EXPECT_EQ(::connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << std::strerror(errno);
      fds_.push_back(c);
    }
    return fd;
  }
  /// Runs `tern stat args...` to the end; returns its exit status, output in `out`.
  int run(std::vector<std::string> args, std::string& out) {
    const std::string out_path = (dir_ / "out.txt").string();
    args.insert(args.begin(), "stat");
    // The child inherits the soft descriptor limit (lowered only around the spawn).
    rlimit was{};
    ::getrlimit(RLIMIT_NOFILE, &was);
    if (nofile_ != 0) {
      rlimit low = was;
      low.rlim_cur = nofile_;
      ::setrlimit(RLIMIT_NOFILE, &low);
    }
    pid_t pid = testing::spawn_tern(std::move(args), out_path);
    ::setrlimit(RLIMIT_NOFILE, &was);
    int ws = 0;
    ::waitpid(pid, &ws, 0);
    std::ifstream in(out_path);
    out.assign(std::istreambuf_iterator<char>(in), {});
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
  }

  fs::path dir_;
  EventLog events_;
  std::vector<std::unique_ptr<ApiServer>> servers_;
  std::vector<int> fds_;
  std::vector<std::thread> threads_;
  rlim_t nofile_ = 0;  // the spawned tern's RLIMIT_NOFILE (0: this process's)
};

// Counts the lines of `text` that start with `prefix`.
size_t lines_starting(const std::string& text, const std::string& prefix) {
  size_t n = 0;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (text.compare(at, prefix.size(), prefix) == 0) ++n;
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return n;
}

TEST_F(StatAll, OneLinePerVmFromASocketDirectory) {
  serve("app0", 1);
  serve("db0", 2);
  dead_socket("gone0");
  std::string out;
  const std::string missing = (dir_ / "nowhere.sock").string();
  EXPECT_EQ(run({"--sock-dir", dir_.string(), "--api-sock", missing, "--once", "--interval",
                 "0.05"},
                out),
            0)
      << out;
  EXPECT_EQ(lines_starting(out, "VM "), 1u) << out;
  EXPECT_EQ(lines_starting(out, "app0 "), 1u) << out;
  EXPECT_EQ(lines_starting(out, "db0 "), 1u) << out;
  EXPECT_EQ(lines_starting(out, "gone0            error: "), 1u) << out;
  EXPECT_EQ(lines_starting(out, "nowhere          error: "), 1u) << out;
  // Each fake's PIO exits go up 10 per read (×2 for db0): the rates differ by VM.
  EXPECT_EQ(out.find("app0             error"), std::string::npos) << out;

  // JSON: the same VMs, by name.
  EXPECT_EQ(run({"--sock-dir", dir_.string(), "--once", "--json", "--interval", "0.05"}, out), 0)
      << out;
  auto j = nlohmann::json::parse(out);
  ASSERT_EQ(j.size(), 3u) << out;
  EXPECT_EQ(j[0]["name"], "app0");
  EXPECT_GT(j[0]["exits_per_s"]["KVM_EXIT_IO"].get<double>(), 0);
  EXPECT_EQ(j[1]["name"], "db0");
  EXPECT_EQ(j[2]["name"], "gone0");
  EXPECT_TRUE(j[2].contains("error"));
}

TEST_F(StatAll, NoVmAnsweringIsAnError) {
  dead_socket("gone0");
  std::string out;
  EXPECT_EQ(run({"--sock-dir", dir_.string(), "--once", "--interval", "0.05"}, out), 1) << out;
  EXPECT_EQ(lines_starting(out, "gone0            error: "), 1u) << out;
  EXPECT_EQ(run({"--all", "--once"}, out), 1) << out;
  EXPECT_NE(out.find("--all: give the VMs' sockets"), std::string::npos) << out;
  EXPECT_EQ(run({"--api-sock", "a", "--api-sock", "b", "--once"}, out), 1) << out;
  EXPECT_NE(out.find("--api-sock: give one socket (several only with --all)"), std::string::npos)
      << out;
}

// A tern that does not accept (its backlog full) and one whose reply announces 100 MB: each is its
// own error line, bounded in time and memory; the answering VM's line is there.
TEST_F(StatAll, AServerThatDoesNotAcceptOrRepliesHugeIsItsOwnErrorLine) {
  serve("app0", 1);
  listener("stuck", 0);
  const int big = listener("huge", 8);
  threads_.emplace_back([big] {
    for (;;) {
      int c = ::accept(big, nullptr, nullptr);
      if (c < 0) return;
      char req[4096];
      (void)!::read(c, req, sizeof req);
      const std::string head = "HTTP/1.1 200 OK\r\nContent-Length: 100000000\r\n\r\n{\"a\":[";
      ssize_t n = ::send(c, head.data(), head.size(), MSG_NOSIGNAL);
      const std::string zeros(1 << 20, '0');  // 10 MB of the body, then the connection ends
      for (int i = 0; i < 10 && n > 0; ++i) n = ::send(c, zeros.data(), zeros.size(), MSG_NOSIGNAL);
      ::close(c);
    }
  });
  std::string out;
  EXPECT_EQ(run({"--sock-dir", dir_.string(), "--once", "--interval", "0.05"}, out), 0) << out;
  EXPECT_EQ(lines_starting(out, "app0             error"), 0u) << out;
  EXPECT_EQ(lines_starting(out, "stuck            error: connect: "), 1u) << out;
  EXPECT_NE(out.find("does not accept connections"), std::string::npos) << out;
  EXPECT_EQ(lines_starting(out, "huge             error: read response: "), 1u) << out;
  EXPECT_NE(out.find("huge.sock GET /tern/stats: body limit exceeded"), std::string::npos) << out;
}

// 150 VMs under a limit of 256 descriptors (a thousand VMs under the usual 1024): every VM's line,
// no "Too many open files" (a thread and an io_context per VM at once ran out, or aborted tern
// stat when asio could not make its eventfd).
TEST_F(StatAll, ManyVmsUnderADescriptorLimit) {
  // Replies are held until 32 requests wait (or a round's last came): VMs answer together, as a
  // loaded host's do, so every fetch allowed at once is in flight at once.
  struct Gate {
    std::mutex mu;
    uint64_t received = 0;
    std::vector<std::function<void()>> held;
  };
  auto gate = std::make_shared<Gate>();
  for (int i = 0; i < 150; ++i) {
    auto server = ApiServer::start(
        (dir_ / ("vm" + std::to_string(1000 + i) + ".sock")).string(),
        [gate](ApiRequest, std::function<void(ApiResponse)> reply) {
          std::vector<std::function<void()>> go;
          {
            std::lock_guard lock(gate->mu);
            const uint64_t n = ++gate->received;
            gate->held.push_back([reply, n] {
              reply(ApiResponse::json(testing::stats_snapshot(monotonic_ns(), n)));
            });
            if (gate->held.size() == 32 || n % 150 == 0) go.swap(gate->held);
          }
          for (auto& f : go) f();
        },
        events_);
    ASSERT_TRUE(server) << server.error().message();
    servers_.push_back(std::move(*server));
  }
  nofile_ = 256;
  std::string out;
  EXPECT_EQ(run({"--sock-dir", dir_.string(), "--once", "--interval", "0.05"}, out), 0) << out;
  EXPECT_EQ(lines_starting(out, "vm1"), 150u) << out;
  EXPECT_EQ(out.find("error"), std::string::npos) << out;
}

}  // namespace
}  // namespace tern
