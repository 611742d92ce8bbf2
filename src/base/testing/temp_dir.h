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

}  // namespace tern::testing
