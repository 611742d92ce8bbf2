// Starting the tern binary from a cli test: stdin /dev/null, stderr to a file, stdout to a given
// fd or to the same file.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>

#include <string>
#include <vector>

extern char** environ;

namespace tern::testing {

/// Starts `tern args...` (TERN_BINARY_PATH) with stderr to `out_path` (created or truncated) and
/// stdout to `stdout_fd`, or to `out_path` too when it is -1. Returns the pid.
inline pid_t spawn_tern(std::vector<std::string> args, const std::string& out_path,
                        int stdout_fd = -1) {
  std::string bin = TERN_BINARY_PATH;
  std::vector<char*> argv{bin.data()};
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (stdout_fd >= 0)
    posix_spawn_file_actions_adddup2(&fa, stdout_fd, 1);
  else
    posix_spawn_file_actions_adddup2(&fa, 2, 1);
  pid_t pid = -1;
  EXPECT_EQ(posix_spawn(&pid, bin.c_str(), &fa, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

}  // namespace tern::testing
