// TempDir: a fresh directory under $TMPDIR (or /tmp) for one test, removed with everything in it
// when the TempDir goes away. path() is empty if it could not be created (tests assert on it).
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>

namespace tern::testing {

class TempDir {
 public:
  /// `prefix` names the directory ("tern-state" gives /tmp/tern-state-XXXXXX).
  explicit TempDir(const std::string& prefix = "tern-test") {
    std::string t = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    path_ = ::mkdtemp(t.data()) ? t : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// Makes `dir` the current directory until it goes away (then the previous one again): for
/// tests of relative paths. Tests run one at a time in a process, so no other test sees it.
class ScopedWorkingDirectory {
 public:
  explicit ScopedWorkingDirectory(const std::string& dir)
      : previous_(std::filesystem::current_path()) {
    std::filesystem::current_path(dir);
  }
  ~ScopedWorkingDirectory() {
    std::error_code ec;
    std::filesystem::current_path(previous_, ec);
  }
  ScopedWorkingDirectory(const ScopedWorkingDirectory&) = delete;
  ScopedWorkingDirectory& operator=(const ScopedWorkingDirectory&) = delete;

 private:
  std::filesystem::path previous_;
};

}  // namespace tern::testing
