#include "stats/http_client.h"

#include <sys/socket.h>
#include <sys/time.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

namespace tern {

namespace http = boost::beast::http;
using boost::asio::local::stream_protocol;

Result<std::string> http_get_unix(const std::string& socket_path, const std::string& target,
                                  std::chrono::milliseconds timeout) {
  const std::string where = socket_path + " GET " + target;
  boost::asio::io_context io;
  stream_protocol::socket sock(io);
  boost::system::error_code ec;
  sock.connect(stream_protocol::endpoint(socket_path), ec);
  if (ec) return fail_code(ec.value(), "connect", socket_path);
  // Blocking I/O bounded by SO_RCVTIMEO/SO_SNDTIMEO: a server that never answers is an error.
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  ::setsockopt(sock.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(sock.native_handle(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);

  http::request<http::empty_body> req{http::verb::get, target, 11};
  req.set(http::field::host, "localhost");
  req.set(http::field::user_agent, "tern-stat");
  req.set(http::field::connection, "close");
  http::write(sock, req, ec);
  if (ec) return fail_code(ec.value(), "write request", where);

  boost::beast::flat_buffer buf;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 * 1024 * 1024);
  http::read(sock, buf, parser, ec);
  if (ec == boost::asio::error::would_block || ec == boost::asio::error::try_again)
    return fail("read response",
                where + ": no reply within " + std::to_string(timeout.count()) + " ms");
  if (ec) {
    if (ec.category() == boost::system::system_category())
      return fail_code(ec.value(), "read response", where);
    return fail("read response", where + ": " + ec.message());
  }
  auto res = parser.release();
  if (res.result() != http::status::ok)
    return fail("GET " + target, socket_path + ": HTTP " + std::to_string(res.result_int()) + " " +
                                     res.body().substr(0, 200));
  boost::system::error_code ignored;
  sock.shutdown(stream_protocol::socket::shutdown_both, ignored);
  return std::move(res.body());
}

}  // namespace tern
