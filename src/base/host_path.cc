#include "base/host_path.h"

#include <unistd.h>

#include <cerrno>
#include <climits>

namespace tern {

Result<std::string> absolute_host_path(std::string_view path, const std::string& field) {
  if (path.empty() || path.front() == '/') return std::string(path);
  while (path.starts_with("./")) {
    path.remove_prefix(2);
    while (path.starts_with('/')) path.remove_prefix(1);
  }
  char cwd[PATH_MAX];
  if (::getcwd(cwd, sizeof cwd) == nullptr)
    return fail_errno(field, "cannot resolve a relative path (getcwd)");
  std::string out(cwd);
  if (path.empty()) return out;  // "." or "./"
  if (out.back() != '/') out += '/';
  out += path;
  return out;
}

}  // namespace tern
