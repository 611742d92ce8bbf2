// Helpers shared by the vhost-user message, request-parser and front-end client files (not an API
// for other areas).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/result.h"
#include "vhost_user/vhost_user_message.h"

namespace tern::vhost_user {

/// request_name() without the "VHOST_USER_" prefix ("GET_CONFIG"); "request N" if unknown.
[[nodiscard]] std::string short_request_name(uint32_t request);

/// Checks a reply's header against what `request` must get back: version 1, REPLY set, the same
/// request code, hdr.size == payload size == `expected_size`, exactly `expected_fds` fds. Errors
/// are "vhost-user GET_CONFIG reply: <what>".
[[nodiscard]] Result<void> check_reply_header(const Message& reply, uint32_t request,
                                              size_t expected_size, size_t expected_fds);

}  // namespace tern::vhost_user
