#include "api/json_reader.h"

#include <optional>
#include <set>
#include <vector>

namespace tern {

Result<nlohmann::json> parse_json_text(std::string_view text, int max_depth) {
  // Depth pre-scan: brackets outside strings. nlohmann's parser is iterative, but a deep value is
  // still costly to build and destroy; nothing tern accepts nests deeper than 3.
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '{' || c == '[') {
      if (++depth > max_depth)
        return fail("JSON body", "nested deeper than " + std::to_string(max_depth) +
                                     " levels (at byte " + std::to_string(i) + ")");
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  // Duplicate keys: nlohmann keeps the last one silently, so {"state": "Paused", "state":
  // "Resumed"} resumed, and a proxy or linter reading the first saw another request. Refused, as
  // Firecracker (serde) does.
  std::vector<std::set<std::string>> keys;  // one set per open object
  std::optional<std::string> duplicate;
  auto watch = [&](int, nlohmann::json::parse_event_t ev, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (ev == E::object_start) {
      keys.emplace_back();
    } else if (ev == E::object_end) {
      if (!keys.empty()) keys.pop_back();
    } else if (ev == E::key && !keys.empty() && parsed.is_string()) {
      if (!keys.back().insert(parsed.get<std::string>()).second && !duplicate)
        duplicate = parsed.get<std::string>();
    }
    return true;
  };
  try {
    auto j = nlohmann::json::parse(text.begin(), text.end(), watch);
    if (duplicate) return fail("JSON body", "duplicate key \"" + *duplicate + "\"");
    return j;
  } catch (const nlohmann::json::exception& e) {
    // e.what() reads "[json.exception.parse_error.101] parse error at line 1, column 5: ...".
    std::string what = e.what();
    auto pos = what.find("] ");
    return fail("JSON body", pos == std::string::npos ? what : what.substr(pos + 2));
  }
}

std::string json_type_name(const nlohmann::json& j) {
  if (j.is_number_integer() || j.is_number_unsigned()) return "integer";
  return j.type_name();
}

Result<JsonReader> JsonReader::open(const nlohmann::json& j, std::string where) {
  if (!j.is_object())
    return fail(where.empty() ? std::string("body") : where,
                "expected a JSON object, got " + json_type_name(j));
  return JsonReader(j, std::move(where));
}

std::string JsonReader::field(const std::string& name) const {
  return where_.empty() ? name : where_ + "." + name;
}

const nlohmann::json* JsonReader::raw(const std::string& name) {
  known_.insert(name);
  auto it = j_->find(name);
  if (it == j_->end() || it->is_null()) return nullptr;
  return &*it;
}

Result<std::optional<std::string>> JsonReader::optional_string(const std::string& name) {
  const nlohmann::json* v = raw(name);
  if (!v) return std::optional<std::string>();
  if (!v->is_string())
    return fail(field(name), "expected a string, got " + json_type_name(*v));
  return std::optional<std::string>(v->get<std::string>());
}

Result<std::string> JsonReader::required_string(const std::string& name) {
  ASSIGN_OR_RETURN(auto v, optional_string(name));
  if (!v) return fail(field(name), "missing required field");
  return *v;
}

Result<std::optional<bool>> JsonReader::optional_bool(const std::string& name) {
  const nlohmann::json* v = raw(name);
  if (!v) return std::optional<bool>();
  if (!v->is_boolean())
    return fail(field(name), "expected true or false, got " + json_type_name(*v));
  return std::optional<bool>(v->get<bool>());
}

Result<std::optional<uint64_t>> JsonReader::optional_uint(const std::string& name, uint64_t min,
                                                          uint64_t max) {
  const nlohmann::json* v = raw(name);
  if (!v) return std::optional<uint64_t>();
  std::string range = " (" + std::to_string(min) + ".." + std::to_string(max) + ")";
  if (v->is_number_unsigned()) {
    uint64_t x = v->get<uint64_t>();
    if (x < min || x > max)
      return fail(field(name), std::to_string(x) + " is out of range" + range);
    return std::optional<uint64_t>(x);
  }
  if (v->is_number_integer())
    return fail(field(name), std::to_string(v->get<int64_t>()) + " is out of range" + range);
  return fail(field(name), "expected an integer, got " + json_type_name(*v));
}

Result<void> JsonReader::finish() const {
  for (const auto& [key, value] : j_->items())
    if (!known_.contains(key)) return fail(field(key), "unknown field");
  return {};
}

}  // namespace tern
