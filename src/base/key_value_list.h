// Splits an option value of the form "key=value[,key=value...]" (QEMU's -drive style, tern's
// --disk and --rng) into its items, checking the shape once for every option that takes one.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"

namespace tern {

/// The items of `text` in order, as views into it. Errors name `option` ("--disk"): an item that
/// is not key=value (with an empty key), and a key given twice ("--disk cache: given more than
/// once"). `keys` ("keys: path, cache, ...") is quoted in the first error. An empty `text` gives
/// no items. Values may be empty and may contain '='.
[[nodiscard]] Result<std::vector<std::pair<std::string_view, std::string_view>>> split_key_values(
    std::string_view text, const std::string& option, std::string_view keys);

}  // namespace tern
