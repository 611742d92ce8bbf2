// Checks the API request parser's files share (api_parser.cc, api_parser_drive.cc): internal to
// src/api, not part of the parser's interface.
#pragma once

#include <string>

#include "api/json_reader.h"
#include "base/result.h"

namespace tern {

/// A path the request names that must exist and be readable now: non-empty, no NUL byte, not a
/// directory, readable by tern. Errors name `field`.
[[nodiscard]] Result<void> check_readable_file(const std::string& path, const std::string& field);

/// A Firecracker field tern does not implement: refused by name when present ("`what` is not
/// supported by tern").
[[nodiscard]] Result<void> reject_unsupported(JsonReader& r, const std::string& name,
                                              const std::string& what);

}  // namespace tern
