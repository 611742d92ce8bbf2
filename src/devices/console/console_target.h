// ConsoleTarget: where the guest console goes, parsed from "stdio" or "file:PATH".
#pragma once

#include <string>
#include <string_view>

#include "base/result.h"

namespace tern {

/// The destination of the guest console output.
struct ConsoleTarget {
  enum class Kind { kStdio, kFile };
  Kind kind = Kind::kStdio;
  std::string path;  ///< For kFile: the file to write (created or truncated).

  /// Parses "stdio" or "file:PATH" (PATH non-empty, no NUL). Errors name `field` as the failing
  /// operation, e.g. "--console: expected 'stdio' or 'file:PATH', got 'tty'".
  [[nodiscard]] static Result<ConsoleTarget> parse(std::string_view spec,
                                                   std::string_view field = "--console");
  /// The spec this target parses from.
  [[nodiscard]] std::string to_string() const;

  bool operator==(const ConsoleTarget&) const = default;
};

}  // namespace tern
