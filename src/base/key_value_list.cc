#include "base/key_value_list.h"

#include <set>

namespace tern {

Result<std::vector<std::pair<std::string_view, std::string_view>>> split_key_values(
    std::string_view text, const std::string& option, std::string_view keys) {
  std::vector<std::pair<std::string_view, std::string_view>> items;
  if (text.empty()) return items;
  std::set<std::string_view> seen;
  size_t pos = 0;
  for (;;) {
    size_t comma = text.find(',', pos);
    if (comma == std::string_view::npos) comma = text.size();
    std::string_view item = text.substr(pos, comma - pos);
    size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0)
      return fail(option, "'" + std::string(item) + "' is not key=value (" + std::string(keys) + ")");
    std::string_view key = item.substr(0, eq);
    if (!seen.insert(key).second) return fail(option + " " + std::string(key), "given more than once");
    items.emplace_back(key, item.substr(eq + 1));
    if (comma == text.size()) break;
    pos = comma + 1;
  }
  return items;
}

}  // namespace tern
