#include "base/result.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tern {

std::string Error::message() const {
  std::string m = op;
  if (!context.empty()) m += (m.empty() ? "" : ": ") + context;
  if (errnum != 0) m += (m.empty() ? "" : ": ") + std::string(std::strerror(errnum));
  return m;
}

void check_failed(const char* expr, const char* file, int line) {
  std::fprintf(stderr, "tern: internal invariant failed: %s (%s:%d)\n", expr, file, line);
  std::abort();
}

}  // namespace tern
