// ApiClient helpers: one synchronous HTTP request to tern's API socket (used by `tern ctl` and the
// API tests), and a reader for the GET /tern/events stream.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>

#include "base/result.h"

namespace tern {

/// A response as the client saw it.
struct HttpReply {
  int status = 0;
  std::string content_type;
  std::string body;
};

/// Sends `method target` with `body` (JSON when non-empty) over the Unix socket at `socket_path`
/// and reads the whole response. Errors name the socket path. `timeout` bounds the whole exchange.
[[nodiscard]] Result<HttpReply> api_request(const std::string& socket_path, std::string_view method,
                                            std::string_view target, std::string_view body = {},
                                            std::chrono::milliseconds timeout =
                                                std::chrono::seconds(30));

/// GET /tern/events: calls `on_line` for each JSON line until it returns false or the server
/// closes the stream (the VM stopped and tern exited).
[[nodiscard]] Result<void> api_read_events(const std::string& socket_path,
                                           const std::function<bool(const std::string&)>& on_line);

}  // namespace tern
