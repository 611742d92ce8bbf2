// Parsing of human-written sizes ("512M", "2G", "1024") into bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace tern {

/// Parses a size: a decimal number with an optional binary suffix K, M, G or T (case-insensitive,
/// optionally followed by "iB" or "B"). A bare number means MiB, as QEMU's -m does.
/// Errors (empty, junk, zero, overflow) name `field` and the text, e.g. "--memory: bad size 'x'".
[[nodiscard]] Result<uint64_t> parse_size(std::string_view text, std::string_view field);

/// "512 MiB", "3.25 GiB", "4 KiB", "17 bytes": a readable rendering of a byte count.
[[nodiscard]] std::string format_size(uint64_t bytes);

}  // namespace tern
