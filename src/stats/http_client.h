// http_get_unix(): one HTTP/1.1 GET over a Unix socket (Boost.Beast), for `tern stat`.
#pragma once

#include <chrono>
#include <string>

#include "base/result.h"

namespace tern {

/// GETs `target` (e.g. "/tern/stats") from the HTTP server listening on the Unix socket at
/// `socket_path` and returns the body of a 200 response. Errors name the socket and say what
/// failed: connect (errno), I/O, timeout (no reply within `timeout`), or a non-200 status with its
/// body. One connection per call.
[[nodiscard]] Result<std::string> http_get_unix(const std::string& socket_path,
                                                const std::string& target,
                                                std::chrono::milliseconds timeout);

}  // namespace tern
