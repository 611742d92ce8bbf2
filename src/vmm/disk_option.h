// The --disk command-line option: "path=FILE[,cache=MODE][,readonly=on][,serial=STR][,queues=N]
// [,io=io_uring|threads]" parsed into a DiskConfig (block/disk_config.h).
#pragma once

#include <string_view>

#include "base/result.h"
#include "block/disk_config.h"

namespace tern {

/// Parses one --disk value. Keys may come in any order, each at most once; `path` is required.
/// Values: cache = writeback | none | unsafe | directsync; readonly = on | off; serial ≤ 20 bytes;
/// queues = 1..64; io = io_uring | threads. Errors name the field ("--disk cache=fast: unknown
/// cache mode ..."). Only the syntax and value ranges are checked here: whether the image exists,
/// is writable or supports O_DIRECT is checked when it is opened (VirtioBlock::create), still
/// before the guest boots.
[[nodiscard]] Result<DiskConfig> parse_disk_option(std::string_view text);

}  // namespace tern
