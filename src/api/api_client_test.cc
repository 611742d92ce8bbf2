// api_get() (the client `tern stat` uses) against a tiny Boost.Beast server on a Unix socket.
#include "api/api_client.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <thread>

namespace tern {
namespace {

namespace http = boost::beast::http;
using boost::asio::local::stream_protocol;

/// Serves exactly one request with `status` and `body`, recording the request target.
class OneShotServer {
 public:
  OneShotServer(http::status status, std::string body)
      : path_("/tmp/tern-http-test-" + std::to_string(::getpid()) + "-" +
              std::to_string(counter_++) + ".sock") {
    ::unlink(path_.c_str());
    acceptor_.emplace(io_, stream_protocol::endpoint(path_));  // listening before the client runs
    thread_ = std::thread([this, status, body = std::move(body)] {
      stream_protocol::socket s(io_);
      acceptor_->accept(s);
      boost::beast::flat_buffer buf;
      http::request<http::string_body> req;
      boost::system::error_code ec;
      http::read(s, buf, req, ec);
      target_ = std::string(req.target());
      http::response<http::string_body> res{status, 11};
      res.set(http::field::content_type, "application/json");
      res.body() = body;
      res.prepare_payload();
      http::write(s, res, ec);
    });
  }
  ~OneShotServer() {
    if (thread_.joinable()) thread_.join();
    ::unlink(path_.c_str());
  }
  const std::string& path() const { return path_; }
  std::string target() {
    thread_.join();
    return target_;
  }

 private:
  static inline int counter_ = 0;
  std::string path_;
  boost::asio::io_context io_;
  std::optional<stream_protocol::acceptor> acceptor_;
  std::thread thread_;
  std::string target_;
};

TEST(ApiClient, GetsBodyOf200) {
  OneShotServer server(http::status::ok, R"({"version":1})");
  auto body = api_get(server.path(), "/tern/stats", std::chrono::seconds(5));
  ASSERT_TRUE(body) << body.error().message();
  EXPECT_EQ(*body, R"({"version":1})");
  EXPECT_EQ(server.target(), "/tern/stats");
}

TEST(ApiClient, Non200IsAnErrorWithStatusAndBody) {
  OneShotServer server(http::status::not_found, R"({"fault_message":"no such path"})");
  auto body = api_get(server.path(), "/tern/nope", std::chrono::seconds(5));
  ASSERT_FALSE(body);
  EXPECT_NE(body.error().message().find("HTTP 404"), std::string::npos) << body.error().message();
  EXPECT_NE(body.error().message().find("no such path"), std::string::npos)
      << body.error().message();
}

TEST(ApiClient, MissingSocketNamesThePath) {
  auto body = api_get("/tmp/tern-no-such-socket.sock", "/tern/stats", std::chrono::seconds(1));
  ASSERT_FALSE(body);
  EXPECT_EQ(body.error().op, "connect");
  EXPECT_NE(body.error().message().find("/tmp/tern-no-such-socket.sock"), std::string::npos);
  EXPECT_NE(body.error().errnum, 0);
}

// A server that takes the request and never answers: the timeout ends the wait with an error
// (its timeout used to bound only asynchronous operations, which it did not use).
TEST(ApiClient, SilentServerIsATimeoutError) {
  const std::string path = "/tmp/tern-http-test-silent-" + std::to_string(::getpid()) + ".sock";
  ::unlink(path.c_str());
  boost::asio::io_context io;
  stream_protocol::acceptor acceptor(io, stream_protocol::endpoint(path));
  stream_protocol::socket held(io);
  std::thread t([&] { acceptor.accept(held); });  // accepts, then reads nothing and says nothing
  auto r = api_request(path, "GET", "/", {}, std::chrono::milliseconds(200));
  t.join();
  ::unlink(path.c_str());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().op, "read response");
  EXPECT_NE(r.error().message().find("no reply within 200 ms"), std::string::npos)
      << r.error().message();
}

}  // namespace
}  // namespace tern
