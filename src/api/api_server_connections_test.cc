// Unit tests: the API server over a real Unix socket (control loop and fake Machine of
// api/testing/api_harness.h): malformed HTTP, huge chunk extensions, bad JSON, stalled and
// concurrent clients, the connection limit, event streams, the socket file at exit.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <atomic>
#include <cstdlib>
#include <future>
#include <thread>

#include "api/api_server.h"
#include "api/testing/api_harness.h"

namespace tern {
namespace {

using testing::ApiHarness;
using testing::fault_of;
using testing::raw_connect;
using testing::raw_exchange;
using testing::read_to_close;
using testing::send_all;

TEST(ApiServer, MalformedHttp) {
  ApiServerOptions opts;
  opts.read_timeout = std::chrono::milliseconds(500);  // the lying request ends in a 408
  ApiHarness h(opts);
  EXPECT_EQ(raw_exchange(h.sock, "GET foo HTTP/1.1\r\nHost: x\r\n\r\n").rfind("HTTP/1.1 400", 0),
            0u);
  EXPECT_EQ(raw_exchange(h.sock, "GET /\r\n\r\n").rfind("HTTP/1.1 400", 0), 0u);  // no version
  EXPECT_EQ(raw_exchange(h.sock, "BLAH BLAH BLAH\r\n\r\n").rfind("HTTP/1.1 400", 0), 0u);
  // Content-Length shorter than the body: the rest is read as a (malformed) next request.
  std::string lying =
      "PUT /actions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n{\"action_type\": "
      "\"FlushMetrics\"}";
  std::string out = raw_exchange(h.sock, lying);
  EXPECT_EQ(out.rfind("HTTP/1.1 400", 0), 0u) << out;
  // A 10 MB body is refused from its Content-Length, before it is read.
  std::string big = "PUT /machine-config HTTP/1.1\r\nHost: x\r\nContent-Length: 10485760\r\n\r\n";
  UniqueFd fd = raw_connect(h.sock);
  send_all(fd, big);
  std::string reply = read_to_close(fd);
  EXPECT_EQ(reply.rfind("HTTP/1.1 413", 0), 0u) << reply;
  // An oversized request head.
  std::string huge_head = "GET / HTTP/1.1\r\nX-Junk: " + std::string(20000, 'a') + "\r\n\r\n";
  EXPECT_EQ(raw_exchange(h.sock, huge_head).rfind("HTTP/1.1 431", 0), 0u);
  // The server is still fine.
  EXPECT_EQ(h.call("GET", "/").status, 200);
}

// Chunk extensions and trailers count toward neither the head nor the body limit, and Beast
// buffers one whole before parsing it: a client streaming a chunk extension grew tern without
// bound (1.8 GiB in 4 s from 4 connections). The read buffer is capped now.
TEST(ApiServer, HugeChunkExtensionOrTrailerIsRefusedNotBuffered) {
  ApiHarness h;
  const std::string head =
      "PUT /actions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string body = R"({"action_type": "FlushMetrics"})";
  char size_hex[16];
  std::snprintf(size_hex, sizeof size_hex, "%zx", body.size());
  // A valid request but for a 4 MiB chunk extension: it used to be accepted (204).
  std::string ext =
      head + size_hex + ";x=" + std::string(4 << 20, 'a') + "\r\n" + body + "\r\n0\r\n\r\n";
  std::string out = raw_exchange(h.sock, ext);
  EXPECT_EQ(out.rfind("HTTP/1.1 400", 0), 0u) << out.substr(0, 200);
  EXPECT_NE(out.find("chunk header or trailer"), std::string::npos) << out.substr(0, 300);
  // A 4 MiB trailer field.
  std::string trailer =
      head + size_hex + "\r\n" + body + "\r\n0\r\nX-T: " + std::string(4 << 20, 'b') + "\r\n\r\n";
  out = raw_exchange(h.sock, trailer);
  EXPECT_TRUE(out.rfind("HTTP/1.1 400", 0) == 0 || out.rfind("HTTP/1.1 431", 0) == 0)
      << out.substr(0, 200);
  // Many small chunks are fine: the body is parsed out of the buffer as it comes.
  std::string chunks = head;
  for (char c : body) chunks += std::string("1\r\n") + c + "\r\n";
  chunks += "0\r\n\r\n";
  out = raw_exchange(h.sock, chunks);
  EXPECT_EQ(out.rfind("HTTP/1.1 204", 0), 0u) << out;
  EXPECT_EQ(h.call("GET", "/").status, 200);
}

TEST(ApiServer, BadJsonBodies) {
  ApiHarness h;
  EXPECT_NE(
      fault_of(h.call("PUT", "/machine-config", R"({"vcpu_count": 2, "mem_)")).find("JSON body"),
      std::string::npos);
  EXPECT_NE(fault_of(h.call("PUT", "/machine-config", std::string(10000, '[')))
                .find("nested deeper than 32"),
            std::string::npos);
  EXPECT_NE(
      fault_of(h.call("PUT", "/actions", "{\"action_type\": \"\xc3\x28\"}")).find("JSON body"),
      std::string::npos);
  EXPECT_EQ(fault_of(h.call("PUT", "/machine-config",
                            R"({"vcpu_count": 2, "mem_size_mib": 64, "cpus": 1})")),
            "cpus: unknown field");
  EXPECT_EQ(
      fault_of(h.call("PUT", "/machine-config", R"({"vcpu_count": true, "mem_size_mib": 64})")),
      "vcpu_count: expected an integer, got boolean");
  // Nothing was applied by the rejected requests.
  EXPECT_EQ(nlohmann::json::parse(h.call("GET", "/machine-config").body)["mem_size_mib"], 128);
}

TEST(ApiServer, StalledClientDoesNotBlockFiftyOthers) {
  ApiServerOptions opts;
  opts.read_timeout = std::chrono::milliseconds(500);
  ApiHarness h(opts);
  UniqueFd stalled = raw_connect(h.sock);
  send_all(stalled, "PUT /machine-config HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{\"vcpu");
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < 50; ++i) {
    clients.emplace_back([&, i] {
      for (int k = 0; k < 4; ++k) {
        auto r = api_request(h.sock, "GET", i % 2 ? "/" : "/machine-config");
        if (r && r->status == 200) ++ok;
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), 200);
  // The stalled client gets its answer once its time is up.
  std::string out = read_to_close(stalled);
  EXPECT_EQ(out.rfind("HTTP/1.1 408", 0), 0u) << out;
}

TEST(ApiServer, ConnectionLimit) {
  ApiServerOptions opts;
  opts.max_connections = 3;
  ApiHarness h(opts);
  std::vector<UniqueFd> idle;
  for (int i = 0; i < 3; ++i) {
    idle.push_back(raw_connect(h.sock));
    // A full round trip on each, so the server has certainly accepted it.
    send_all(idle.back(), "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    char buf[512];
    EXPECT_GT(::recv(idle.back().get(), buf, sizeof buf, 0), 0);
  }
  std::string out = raw_exchange(h.sock, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(out.rfind("HTTP/1.1 503", 0), 0u) << out;
  idle.clear();
}

/// GET / until it is not refused for want of a connection slot (bounded: ~10 s): waits for the
/// server to free a slot, without guessing how long that takes.
int status_once_a_slot_is_free(const std::string& sock) {
  int status = 0;
  for (int i = 0; i < 200; ++i) {
    auto r = api_request(sock, "GET", "/");
    status = r ? r->status : -1;
    if (status != 503 && status != -1) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return status;
}

/// Waits (poll(2), up to 10 s) until `fd` has something to read.
bool readable(const UniqueFd& fd) {
  pollfd p{fd.get(), POLLIN, 0};
  return ::poll(&p, 1, 10'000) == 1;
}

// A client that pipelines requests and never reads the answers (or is stopped) used to hold its
// connection for ever: the answer's write waited without a timeout, so 128 such clients locked
// everyone out of the API (tern snapshot, power-off) until they died.
TEST(ApiServer, ClientThatNeverTakesItsAnswersIsDisconnected) {
  ApiServerOptions opts;
  opts.max_connections = 1;
  opts.read_timeout = std::chrono::milliseconds(300);
  ApiHarness h(opts);
  UniqueFd stuck = raw_connect(h.sock);
  int small = 4096;
  ::setsockopt(stuck.get(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  // Pipeline until the server stops reading (its answers fill the socket): it is then blocked
  // writing an answer nobody takes.
  const std::string one = "GET /vm/config HTTP/1.1\r\nHost: x\r\n\r\n";
  std::string many;
  for (int i = 0; i < 64; ++i) many += one;
  size_t sent = 0;
  for (int spins = 0; spins < 200 && sent < (size_t{64} << 20); ++spins) {
    ssize_t n = ::send(stuck.get(), many.data(), many.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      spins = 0;
      continue;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_GT(sent, 0u);
  // After the write timeout the one connection slot is free again (before the fix: 503 for ever).
  EXPECT_EQ(status_once_a_slot_is_free(h.sock), 200);
}

// Over the connection limit, a client that sends its request once the server has answered 503
// used to fail writing it (EPIPE: the server had closed), so tern ctl reported "write request:
// Broken pipe" and never read the 503. Now the server lingers: the write succeeds, the 503 is read.
TEST(ApiServer, RefusedClientCanStillSendItsRequestAndReadThe503) {
  ApiServerOptions opts;
  opts.max_connections = 1;
  ApiHarness h(opts);
  UniqueFd held = raw_connect(h.sock);
  send_all(held, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  char buf[512];
  ASSERT_GT(::recv(held.get(), buf, sizeof buf, 0), 0);  // accepted: the one slot is taken
  for (int i = 0; i < 5; ++i) {
    UniqueFd fd = raw_connect(h.sock);
    ASSERT_TRUE(readable(fd));  // the 503 is written (the old server had closed by now)
    const std::string req =
        "PUT /actions HTTP/1.1\r\nHost: x\r\nContent-Length: 31\r\n\r\n"
        "{\"action_type\": \"FlushMetrics\"}";
    ssize_t n = ::send(fd.get(), req.data(), req.size(), MSG_NOSIGNAL);
    EXPECT_EQ(n, static_cast<ssize_t>(req.size())) << "send: " << std::strerror(errno);
    std::string out = read_to_close(fd);
    EXPECT_EQ(out.rfind("HTTP/1.1 503", 0), 0u) << out;
  }
  held.reset();
  EXPECT_EQ(status_once_a_slot_is_free(h.sock), 200);
}

/// Opens GET /tern/events on a raw socket and reads the response head (and what follows it).
std::string open_event_stream(const UniqueFd& fd) {
  send_all(fd, "GET /tern/events HTTP/1.1\r\nHost: x\r\n\r\n");
  std::string out;
  char buf[4096];
  while (out.find("\r\n\r\n") == std::string::npos) {
    ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// Issue #8 defect 5: 128 idle event streams used to take every connection slot, so control
// requests (tern snapshot) got 503. Streams have their own limit below the connection limit.
TEST(ApiServer, EventStreamsLeaveRoomForControlRequests) {
  const ApiServerOptions defaults;
  ApiHarness h;
  std::vector<UniqueFd> streams;
  int opened = 0, refused = 0;
  for (size_t i = 0; i < defaults.max_connections; ++i) {
    UniqueFd fd = raw_connect(h.sock);
    std::string head = open_event_stream(fd);
    if (head.rfind("HTTP/1.1 200", 0) == 0) {
      ++opened;
      streams.push_back(std::move(fd));
    } else if (head.rfind("HTTP/1.1 503", 0) == 0) {
      ++refused;
      std::string all = head + read_to_close(fd);
      EXPECT_NE(all.find("too many event streams (limit 32)"), std::string::npos) << all;
    }
  }
  EXPECT_EQ(opened, 32);
  EXPECT_EQ(refused, 96);
  // The streams are still open; control requests get through, on many connections at once.
  std::vector<UniqueFd> control;
  const size_t streams_limit = 32;  // README: "of which at most 32 GET /tern/events streams"
  for (size_t i = 0; i + 1 < defaults.max_connections - streams_limit; ++i) {
    control.push_back(raw_connect(h.sock));
    send_all(control.back(), "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    char buf[512];
    ssize_t n = ::recv(control.back().get(), buf, sizeof buf, 0);
    ASSERT_GT(n, 0);
    EXPECT_EQ(std::string(buf, static_cast<size_t>(n)).rfind("HTTP/1.1 200", 0), 0u);
  }
  EXPECT_EQ(h.call("GET", "/machine-config").status, 200);  // the last free slot
}

// Issue #8 defect 5: a subscriber that never reads used to make its output queue grow without
// bound. Now it gets a last line saying why and is closed once it falls 256 KiB behind.
TEST(ApiServer, SlowEventSubscriberIsDroppedWithALastLine) {
  ApiServerOptions opts;
  opts.read_timeout = std::chrono::minutes(10);  // the test reads the drop line when it is ready
  ApiHarness h(opts);
  UniqueFd fd = raw_connect(h.sock);
  std::string head = open_event_stream(fd);
  ASSERT_EQ(head.rfind("HTTP/1.1 200", 0), 0u) << head;
  // 4 MiB of events while the subscriber reads nothing: far more than a socket buffers.
  const std::string pad(1024, 'x');
  for (int i = 0; i < 4096; ++i) h.events.publish({{"event", "test"}, {"pad", pad}});
  std::string body = head.substr(head.find("\r\n\r\n") + 4) + read_to_close(fd);
  ASSERT_FALSE(body.empty());
  ASSERT_EQ(body.back(), '\n');
  EXPECT_LT(body.size(), size_t{4} << 20);
  std::vector<std::string> lines;
  for (size_t pos = 0; pos < body.size();) {
    size_t nl = body.find('\n', pos);
    lines.push_back(body.substr(pos, nl - pos));
    pos = nl + 1;
  }
  auto last = nlohmann::json::parse(lines.back());
  EXPECT_EQ(last["event"], "dropped");
  EXPECT_EQ(last["reason"],
            "this subscriber fell more than 262144 bytes of events behind; reconnect for the "
            "backlog");
  // What came before is an unbroken run of events (none lost in the middle).
  uint64_t seq = 0;
  for (size_t i = 0; i + 1 < lines.size(); ++i) {
    auto j = nlohmann::json::parse(lines[i]);
    if (seq) {
      EXPECT_EQ(j["seq"].get<uint64_t>(), seq + 1);
    }
    seq = j["seq"].get<uint64_t>();
  }
  // The server is fine, and a new subscriber gets the backlog.
  EXPECT_EQ(h.call("GET", "/").status, 200);
  UniqueFd again = raw_connect(h.sock);
  EXPECT_EQ(open_event_stream(again).rfind("HTTP/1.1 200", 0), 0u);
}

// A subscriber that shuts down its sending side after the request (socat, nc -N) used to get the
// backlog and then the end of the stream at once - which reads as "tern exited".
TEST(ApiServer, HalfClosedEventSubscriberStillGetsLiveEvents) {
  ApiHarness h;
  UniqueFd fd = raw_connect(h.sock);
  std::string head = open_event_stream(fd);
  ASSERT_EQ(head.rfind("HTTP/1.1 200", 0), 0u) << head;
  ASSERT_EQ(::shutdown(fd.get(), SHUT_WR), 0);
  // Event after event, each read back before the next: the old server ended the stream as soon as
  // it saw the EOF, so one of these never came.
  std::string got = head;
  char buf[4096];
  for (int k = 0; k < 20; ++k) {
    const std::string name = "test-live-" + std::to_string(k);
    h.events.publish({{"event", name}});
    while (got.find("\"" + name + "\"") == std::string::npos) {
      ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);  // 10 s timeout (raw_connect)
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
    ASSERT_NE(got.find("\"event\":\"" + name + "\""), std::string::npos) << got;
  }
  // Closing it altogether frees its stream slot (at the next event at the latest).
  fd.reset();
  h.events.publish({{"event", "test-after-close"}});
  ApiServerOptions defaults;
  std::vector<UniqueFd> streams;
  for (size_t i = 0; i + 1 < defaults.max_event_streams; ++i) {
    streams.push_back(raw_connect(h.sock));
    EXPECT_EQ(open_event_stream(streams.back()).rfind("HTTP/1.1 200", 0), 0u) << i;
  }
  // The last one needs the closed subscriber's slot: the server frees it when that event's write
  // fails, on its own thread, so ask until it is there (bounded).
  std::string last;
  for (int i = 0; i < 200 && last.rfind("HTTP/1.1 200", 0) != 0; ++i) {
    if (i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    UniqueFd fd2 = raw_connect(h.sock);
    last = open_event_stream(fd2);
    if (last.rfind("HTTP/1.1 200", 0) == 0) streams.push_back(std::move(fd2));
  }
  EXPECT_EQ(last.rfind("HTTP/1.1 200", 0), 0u) << last;
}

TEST(ApiServer, EventsStreamBacklogThenLiveUntilExit) {
  ApiHarness h;
  h.configure_and_start();
  std::vector<std::string> seen;
  std::promise<void> connected;  // the stream is open once its first (backlog) line arrived
  std::thread reader([&] {
    auto r = api_read_events(h.sock, [&](const std::string& line) {
      seen.push_back(line);
      if (seen.size() == 1) connected.set_value();
      return true;
    });
    EXPECT_TRUE(r);
    if (seen.empty()) connected.set_value();
  });
  connected.get_future().wait();
  EXPECT_EQ(h.call("PATCH", "/vm", R"({"state": "Paused"})").status, 204);
  EXPECT_EQ(h.call("PUT", "/tern/power-off").status, 204);
  EXPECT_EQ(h.wait_exit(), 0);
  // As in tern: once the control loop ended, shutdown flushes the stream and closes it.
  h.shutdown_server();
  reader.join();
  std::vector<std::string> states;
  for (auto& l : seen) {
    auto j = nlohmann::json::parse(l);
    if (j["event"] == "state") states.push_back(j["state"]);
  }
  EXPECT_EQ(states, (std::vector<std::string>{"Not started", "Running", "Paused", "Stopped"}));
}

}  // namespace
}  // namespace tern

namespace tern {
namespace {

// A tern that exits removes its API socket only while the path still names the socket it bound:
// after `rm` of the path and a second tern binding it, the first one's exit must leave the
// second one's socket (and its clients) alone (issue 31 item 14a).
TEST(ApiServer, ExitLeavesASocketAnotherServerBoundAtThePath) {
  const std::string sock = "/tmp/tern-api-rebound-" + std::to_string(::getpid()) + ".sock";
  auto answer = [](const char* who) {
    return [who](ApiRequest, std::function<void(ApiResponse)> reply) {
      reply(ApiResponse::json({{"server", who}}));
    };
  };
  EventLog events;
  auto first = ApiServer::start(sock, answer("first"), events);
  ASSERT_TRUE(first) << first.error().message();
  ASSERT_EQ(::unlink(sock.c_str()), 0);
  auto second = ApiServer::start(sock, answer("second"), events);
  ASSERT_TRUE(second) << second.error().message();

  (*first)->shutdown();
  struct stat st {};
  ASSERT_EQ(::lstat(sock.c_str(), &st), 0) << "the first server's exit removed the second's socket";
  auto r = api_request(sock, "GET", "/");
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(nlohmann::json::parse(r->body)["server"], "second");

  (*second)->shutdown();  // its own socket: removed
  EXPECT_NE(::lstat(sock.c_str(), &st), 0);
}

}  // namespace
}  // namespace tern
