#include "api/api_client.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/basic_stream.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

namespace tern {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using local = asio::local::stream_protocol;

namespace {

Result<void> connect(local::socket& s, const std::string& path) {
  beast::error_code ec;
  s.connect(local::endpoint(path), ec);
  if (ec) return fail_code(ec.value(), "connect", path);
  return {};
}

}  // namespace

namespace {
Result<HttpReply> request_once(const std::string& socket_path, std::string_view method,
                               std::string_view target, std::string_view body,
                               std::chrono::milliseconds timeout, size_t max_body);
}  // namespace

Result<HttpReply> api_request(const std::string& socket_path, std::string_view method,
                              std::string_view target, std::string_view body,
                              std::chrono::milliseconds timeout, size_t max_body) {
  // asio throws when it cannot make its descriptors (EMFILE: tern stat --all over many VMs):
  // that request's error, not the end of the process.
  try {
    return request_once(socket_path, method, target, body, timeout, max_body);
  } catch (const boost::system::system_error& e) {
    return fail_code(e.code().value(), "connect", socket_path);
  }
}

namespace {

Result<HttpReply> request_once(const std::string& socket_path, std::string_view method,
                               std::string_view target, std::string_view body,
                               std::chrono::milliseconds timeout, size_t max_body) {
  const std::string where = socket_path + " " + std::string(method) + " " + std::string(target);
  asio::io_context ioc;
  beast::basic_stream<local> stream(ioc);
  beast::error_code ec;
  // Connecting is bounded too: a listener that does not accept (a stuck server whose backlog is
  // full) makes a blocking connect(2) on a Unix socket wait for ever.
  stream.expires_after(timeout);
  stream.async_connect(local::endpoint(socket_path), [&ec](beast::error_code e) { ec = e; });
  ioc.run();
  if (ec == beast::error::timeout)
    return fail("connect", socket_path + ": not accepted within " + std::to_string(timeout.count()) +
                               " ms");
  if (ec == asio::error::would_block || ec == asio::error::no_buffer_space)
    return fail("connect", socket_path + ": the server does not accept connections (its backlog is full)");
  if (ec) return fail_code(ec.value(), "connect", socket_path);

  http::request<http::string_body> req;
  req.method_string(beast::string_view(method.data(), method.size()));
  req.target(beast::string_view(target.data(), target.size()));
  req.version(11);
  req.set(http::field::host, "localhost");
  req.set(http::field::user_agent, "tern");
  if (!body.empty()) {
    req.set(http::field::content_type, "application/json");
    req.body() = std::string(body);
  }
  req.prepare_payload();
  req.keep_alive(false);
  // basic_stream's deadline only bounds asynchronous operations (a blocking read would wait for
  // ever; asio retries a SO_RCVTIMEO timeout itself): start each step asynchronously and run the
  // context until it completes or the deadline cancels it.
  stream.expires_after(timeout);
  ioc.restart();
  http::async_write(stream, req, [&ec](beast::error_code e, size_t) { ec = e; });
  ioc.run();
  if (ec == beast::error::timeout)
    return fail("write request",
                where + ": not accepted within " + std::to_string(timeout.count()) + " ms");
  if (ec) return fail_code(ec.value(), "write request", where);

  beast::flat_buffer buf;
  http::response_parser<http::string_body> parser;
  parser.body_limit(max_body);
  stream.expires_after(timeout);
  ioc.restart();
  // The header first, then the body: read in one async_read, a reply whose Content-Length was
  // over body_limit was read whole all the same (Boost 1.74; measured: a 60 MB reply, 1.5 GB).
  http::async_read_header(stream, buf, parser, [&ec](beast::error_code e, size_t) { ec = e; });
  ioc.run();
  if (!ec) {
    ioc.restart();
    http::async_read(stream, buf, parser, [&ec](beast::error_code e, size_t) { ec = e; });
    ioc.run();
  }
  if (ec == beast::error::timeout)
    return fail("read response",
                where + ": no reply within " + std::to_string(timeout.count()) + " ms");
  if (ec) {
    if (ec.category() == boost::system::system_category())
      return fail_code(ec.value(), "read response", where);
    return fail("read response", where + ": " + ec.message());
  }
  auto& res = parser.get();
  HttpReply r;
  r.status = static_cast<int>(res.result_int());
  r.content_type = std::string(res[http::field::content_type]);
  r.body = std::move(res.body());
  beast::error_code ignored;
  stream.socket().shutdown(local::socket::shutdown_both, ignored);
  return r;
}

}  // namespace

Result<std::string> api_get(const std::string& socket_path, std::string_view target,
                            std::chrono::milliseconds timeout, size_t max_body) {
  ASSIGN_OR_RETURN(HttpReply r, api_request(socket_path, "GET", target, {}, timeout, max_body));
  if (r.status != 200)
    return fail("GET " + std::string(target),
                socket_path + ": HTTP " + std::to_string(r.status) + " " + r.body.substr(0, 200));
  return std::move(r.body);
}

Result<void> api_read_events(const std::string& socket_path,
                             const std::function<bool(const std::string&)>& on_line) {
  asio::io_context ioc;
  local::socket s(ioc);
  TRY(connect(s, socket_path));
  std::string req = "GET /tern/events HTTP/1.1\r\nHost: localhost\r\n\r\n";
  beast::error_code ec;
  asio::write(s, asio::buffer(req), ec);
  if (ec) return fail_code(ec.value(), "write request", socket_path);
  std::string data;
  size_t n = asio::read_until(s, asio::dynamic_buffer(data), "\r\n\r\n", ec);
  if (ec) return fail("read response", socket_path + ": " + ec.message());
  std::string head = data.substr(0, n);
  data.erase(0, n);
  if (head.rfind("HTTP/1.1 200", 0) != 0)
    return fail("GET /tern/events", head.substr(0, head.find('\r')));
  for (;;) {
    n = asio::read_until(s, asio::dynamic_buffer(data), "\n", ec);
    if (ec) return {};  // the stream ends when tern exits
    std::string line = data.substr(0, n - 1);
    data.erase(0, n);
    if (!on_line(line)) return {};
  }
}

}  // namespace tern
