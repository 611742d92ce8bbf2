// BoundSocketPath: the filesystem name of a Unix socket this process bound, removed at the end only
// while the path still names that socket file.
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>

#include "base/result.h"

namespace tern {

/// Remembers the socket file a bind() created (st_dev, st_ino, read right after the bind) so that
/// remove() unlinks the path only while it still names that file: after an `rm` of the path, or
/// another process replacing a socket it found unanswered, the path names someone else's socket
/// and stays. (Between the lstat and the unlink another bind could still slip in; the window is
/// one system call wide.)
class BoundSocketPath {
 public:
  BoundSocketPath() = default;
  /// Moving hands the removal over: the moved-from value removes nothing.
  BoundSocketPath(BoundSocketPath&& o) noexcept { *this = std::move(o); }
  BoundSocketPath& operator=(BoundSocketPath&& o) noexcept {
    path_ = std::exchange(o.path_, {});
    dev_ = o.dev_;
    ino_ = o.ino_;
    return *this;
  }
  /// Records the file now at `path` (call right after bind). Errors: lstat's, with `op` as the
  /// operation named (e.g. "--api-sock").
  [[nodiscard]] static Result<BoundSocketPath> after_bind(const std::string& path,
                                                          const std::string& op);
  /// Unlinks the path if it still names the recorded socket file; a no-op when default-built or
  /// already removed. Returns whether it unlinked.
  bool remove();
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  std::string path_;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
};

}  // namespace tern
