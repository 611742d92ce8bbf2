#include "devices/console/console_target.h"

namespace tern {

Result<ConsoleTarget> ConsoleTarget::parse(std::string_view spec, std::string_view field) {
  constexpr std::string_view kFilePrefix = "file:";
  if (spec == "stdio") return ConsoleTarget{Kind::kStdio, {}};
  if (spec.starts_with(kFilePrefix)) {
    std::string_view path = spec.substr(kFilePrefix.size());
    if (path.empty())
      return fail(std::string(field), "file: needs a path, e.g. file:/tmp/console.log");
    if (path.find('\0') != std::string_view::npos)
      return fail(std::string(field), "path contains a NUL byte");
    return ConsoleTarget{Kind::kFile, std::string(path)};
  }
  return fail(std::string(field),
              "expected 'stdio' or 'file:PATH', got '" + std::string(spec) + "'");
}

std::string ConsoleTarget::to_string() const {
  return kind == Kind::kStdio ? std::string("stdio") : "file:" + path;
}

}  // namespace tern
