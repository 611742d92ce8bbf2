#include "base/socket_path.h"

#include <sys/stat.h>
#include <unistd.h>

namespace tern {

Result<BoundSocketPath> BoundSocketPath::after_bind(const std::string& path, const std::string& op) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return fail_errno(op, path);
  BoundSocketPath b;
  b.path_ = path;
  b.dev_ = st.st_dev;
  b.ino_ = st.st_ino;
  return b;
}

bool BoundSocketPath::remove() {
  if (path_.empty()) return false;
  struct stat st {};
  bool ours = ::lstat(path_.c_str(), &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_;
  bool removed = ours && ::unlink(path_.c_str()) == 0;
  path_.clear();
  return removed;
}

}  // namespace tern
