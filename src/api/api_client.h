// The HTTP client of tern's API socket (Boost.Beast over a Unix socket): one synchronous request
// (`tern ctl`, `tern stat`, `tern snapshot`, the API and KVM tests) and a reader for the
// GET /tern/events stream.
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

/// The largest reply body api_request() reads by default (bytes); a longer one is an error.
inline constexpr size_t kApiMaxReplyBody = 64 * 1024 * 1024;

/// Sends `method target` with `body` (JSON when non-empty) over the Unix socket at `socket_path`
/// and reads the whole response (one connection per call). `timeout` bounds connecting, sending
/// the request and, again, reading the whole reply (at most `max_body` bytes of body). Errors name the socket path and say what failed: connect
/// (errno), write request, read response (errno, a malformed reply, or "no reply within N ms").
[[nodiscard]] Result<HttpReply> api_request(
    const std::string& socket_path, std::string_view method, std::string_view target,
    std::string_view body = {}, std::chrono::milliseconds timeout = std::chrono::seconds(30),
    size_t max_body = kApiMaxReplyBody);

/// GETs `target` (e.g. "/tern/stats") and returns the body of a 200 response. Errors: those of
/// api_request(), or a non-200 status ("GET <target>: <socket>: HTTP <status> <body prefix>").
[[nodiscard]] Result<std::string> api_get(const std::string& socket_path, std::string_view target,
                                          std::chrono::milliseconds timeout,
                                          size_t max_body = kApiMaxReplyBody);

/// GET /tern/events: calls `on_line` for each JSON line until it returns false or the server
/// closes the stream (the VM stopped and tern exited). No timeout: the stream is idle between
/// events.
[[nodiscard]] Result<void> api_read_events(const std::string& socket_path,
                                           const std::function<bool(const std::string&)>& on_line);

}  // namespace tern
