// printable(): untrusted bytes (a snapshot's kind or name string) made safe to put in an error
// message or a log line.
#pragma once

#include <string>
#include <string_view>

namespace tern {

/// `s` with every byte outside printable ASCII, and the backslash, written as \xNN: no terminal
/// escape or line break from untrusted input reaches a message.
[[nodiscard]] std::string printable(std::string_view s);

}  // namespace tern
