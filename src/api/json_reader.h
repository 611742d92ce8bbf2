// JsonReader: strict, field-naming access to one JSON object of a request or config file —
// wrong types, missing required fields and unknown fields each become an Error naming the field.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "base/result.h"

namespace tern {

/// Parses `text` as JSON. Rejects (with a message saying where) syntax errors, truncated input,
/// invalid UTF-8 and nesting deeper than `max_depth` (checked before the parser runs, so a
/// pathological body costs one linear scan).
[[nodiscard]] Result<nlohmann::json> parse_json_text(std::string_view text, int max_depth = 32);

/// Reads the fields of one JSON object. `where` prefixes field names in errors ("machine-config"
/// gives "machine-config.vcpu_count"); empty means top level. A JSON null counts as absent for the
/// optional getters. Call finish() last: it rejects any field that no getter asked for.
class JsonReader {
 public:
  /// Fails unless `j` is an object.
  static Result<JsonReader> open(const nlohmann::json& j, std::string where);

  [[nodiscard]] Result<std::string> required_string(const std::string& name);
  [[nodiscard]] Result<std::optional<std::string>> optional_string(const std::string& name);
  [[nodiscard]] Result<std::optional<bool>> optional_bool(const std::string& name);
  /// An integer in [min, max] (JSON floats and strings are type errors).
  [[nodiscard]] Result<std::optional<uint64_t>> optional_uint(const std::string& name, uint64_t min,
                                                              uint64_t max);
  /// The raw value (absent or null → nullptr), marking the field as known.
  [[nodiscard]] const nlohmann::json* raw(const std::string& name);
  /// Fails on the first field no getter asked for.
  [[nodiscard]] Result<void> finish() const;
  /// "where.name" (or "name").
  [[nodiscard]] std::string field(const std::string& name) const;

 private:
  JsonReader(const nlohmann::json& j, std::string where) : j_(&j), where_(std::move(where)) {}
  const nlohmann::json* j_;
  std::string where_;
  std::set<std::string> known_;
};

/// JSON type name for messages ("string", "number", "object", ...).
[[nodiscard]] std::string json_type_name(const nlohmann::json& j);

}  // namespace tern
