// Helpers for qcow2 tests that use the peer, qemu-img (Debian's qemu-utils): run a command and
// get its exit status and output; write a patterned raw file.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace tern::testing {

struct CommandResult {
  int status = -1;     ///< Exit status (-1: did not run / killed).
  std::string output;  ///< stdout and stderr.
};

/// Runs `cmd` through /bin/sh with stderr folded into stdout.
inline CommandResult run_command(const std::string& cmd) {
  CommandResult r;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

/// Bytes from a seeded generator (the same seed gives the same bytes).
inline std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937 g(seed);
  for (auto& b : v) b = static_cast<uint8_t>(g());
  return v;
}

inline void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
}

inline std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

/// True if `qemu-img check` output and status say "no corruption" (status 0, or 3 = leaked
/// clusters only, with no "ERROR" / corruption line).
inline bool check_clean(const CommandResult& r) {
  if (r.status == 0) return true;
  return r.status == 3 && r.output.find("ERROR") == std::string::npos &&
         r.output.find("corruption") == std::string::npos &&
         r.output.find("leaked clusters") != std::string::npos;
}

}  // namespace tern::testing
