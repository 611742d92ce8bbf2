// ApiServer: the control API's HTTP/1.1 server on a Unix socket (Boost.Beast over Asio local
// stream sockets), on a thread of its own. It parses and validates each request (api_parser.h) and
// hands the value to `dispatch` (which queues it for the control thread); the reply comes back
// asynchronously, so a slow command never blocks other clients.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "api/api_parser.h"
#include "api/api_request.h"
#include "base/result.h"
#include "api/event_log.h"

namespace tern {

/// Bounds on what one client can make the server hold.
struct ApiServerOptions {
  size_t max_header_bytes = 8 * 1024;        ///< Larger request heads get 431.
  size_t max_body_bytes = kMaxApiBodyBytes;  ///< Larger bodies get 413 (from Content-Length).
  /// A request (or the wait for the next one on a kept-alive connection) must arrive whole within
  /// this time; otherwise 408 and the connection is closed. An answer the client does not take
  /// within this time also closes the connection.
  std::chrono::milliseconds read_timeout{5000};
  size_t max_connections = 128;  ///< Connections beyond this get 503 and are closed.
  /// GET /tern/events streams beyond this get 503. Streams count toward max_connections, so at
  /// least max_connections - max_event_streams stay for control requests.
  size_t max_event_streams = 32;
  /// Event lines one stream may have waiting (beyond what its socket buffers). A subscriber that
  /// falls further behind gets a last line {"event": "dropped", ...} and is closed; if it does not
  /// take that line within read_timeout either, it is closed without it.
  size_t max_event_queue_bytes = 256 * 1024;
};

class ApiServer {
 public:
  /// Takes a validated request and a function to call (from any thread, once) with its answer.
  using Dispatch = std::function<void(ApiRequest, std::function<void(ApiResponse)>)>;

  /// Binds `socket_path` (a stale socket nobody listens on is replaced; a live one or another kind
  /// of file is an error naming the path) and starts serving on a new thread. GET /tern/events is
  /// answered from `events` directly: the backlog, then each new event, one JSON object per line.
  static Result<std::unique_ptr<ApiServer>> start(const std::string& socket_path, Dispatch dispatch,
                                                  EventLog& events, ApiServerOptions options = {});
  /// Stops at once (as shutdown() with no grace).
  ~ApiServer();
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  /// Stops accepting, closes idle and in-flight connections, lets event streams write what they
  /// hold (at most `grace`), joins the thread and removes the socket file, only if the path
  /// still names the socket this server bound (not one another tern bound there since).
  /// Idempotent.
  void shutdown(std::chrono::milliseconds grace = std::chrono::milliseconds(0));

  struct Impl;

 private:
  explicit ApiServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tern
