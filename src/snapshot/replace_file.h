// ReplacementFile: a file written beside its target and renamed over it only when complete, so
// the target holds either its old contents or the new ones, never a mix (also across a crash or
// power loss, given the fsyncs below). Shared by the snapshot state and memory files.
#pragma once

#include <string>

#include "base/fd.h"
#include "base/result.h"

namespace tern::snap {

/// The directory part of `path` ("." for a bare name, "/" for "/x").
[[nodiscard]] std::string dir_of(const std::string& path);

/// fsync(2) of directory `dir`, making renames and creations in it durable. Filesystems that
/// cannot fsync a directory (EINVAL) are not an error. Errors name the directory.
[[nodiscard]] Result<void> fsync_dir(const std::string& dir);

/// A temporary file ".NAME.tern-tmp-XXXXXX" (mode 0600, random suffix, created exclusively) in the
/// directory of `target`, hence on the same filesystem, so commit() is a rename(2).
///
/// The destructor unlinks the temporary unless commit() succeeded: a failed or cancelled write
/// leaves nothing; a tern killed meanwhile leaves at most that clearly named stray file. The
/// target is never opened or truncated: whoever has it open or mapped keeps its old inode.
class ReplacementFile {
 public:
  /// Creates the temporary. `direct`: the fd is (re)opened with O_DIRECT; a filesystem without it
  /// fails with EINVAL naming the target. Errors (missing directory, EACCES, ...) name the target.
  [[nodiscard]] static Result<ReplacementFile> create(const std::string& target,
                                                      bool direct = false);
  ReplacementFile(ReplacementFile&& o) noexcept;
  ReplacementFile& operator=(ReplacementFile&&) = delete;
  ReplacementFile(const ReplacementFile&) = delete;
  ReplacementFile& operator=(const ReplacementFile&) = delete;
  ~ReplacementFile();

  /// The open temporary (write-only). Invalid after sync_and_close().
  [[nodiscard]] int fd() const { return fd_.get(); }
  [[nodiscard]] const std::string& target() const { return target_; }
  [[nodiscard]] const std::string& temp_path() const { return tmp_; }

  /// fsync(2) then close(2) of the temporary; errors (EIO, ENOSPC...) name the target.
  [[nodiscard]] Result<void> sync_and_close();
  /// rename(2) of the (synced and closed) temporary over the target, then fsync of the target's
  /// directory. After success the destructor leaves the file alone. Errors name both paths.
  [[nodiscard]] Result<void> commit();

 private:
  ReplacementFile() = default;
  UniqueFd fd_;
  std::string target_;
  std::string tmp_;  // empty once committed (or moved from)
};

}  // namespace tern::snap
