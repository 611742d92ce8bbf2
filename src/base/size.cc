#include "base/size.h"

#include <cctype>
#include <cstdio>

#include "base/checked.h"

namespace tern {

Result<uint64_t> parse_size(std::string_view text, std::string_view field) {
  auto bad = [&](const char* why) {
    return fail(std::string(field), std::string(why) + " '" + std::string(text) + "'");
  };
  size_t i = 0;
  uint64_t n = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    auto m = checked_mul(n, 10);
    auto a = m ? checked_add(*m, static_cast<uint64_t>(text[i] - '0')) : std::nullopt;
    if (!a) return bad("size too large:");
    n = *a;
    ++i;
  }
  if (i == 0) return bad("bad size (expected e.g. 512M or 2G):");
  std::string suffix;
  for (; i < text.size(); ++i) suffix += static_cast<char>(std::toupper(static_cast<unsigned char>(text[i])));
  uint64_t mult;
  if (suffix.empty()) mult = MiB;
  else if (suffix == "K" || suffix == "KB" || suffix == "KIB") mult = KiB;
  else if (suffix == "M" || suffix == "MB" || suffix == "MIB") mult = MiB;
  else if (suffix == "G" || suffix == "GB" || suffix == "GIB") mult = GiB;
  else if (suffix == "T" || suffix == "TB" || suffix == "TIB") mult = 1024 * GiB;
  else return bad("bad size suffix (use K, M, G or T):");
  auto bytes = checked_mul(n, mult);
  if (!bytes) return bad("size too large:");
  if (*bytes == 0) return bad("size must be positive:");
  return *bytes;
}

std::string format_size(uint64_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  double v = static_cast<double>(bytes);
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[48];
  if (u == 0 || v == static_cast<double>(static_cast<uint64_t>(v)))
    std::snprintf(buf, sizeof buf, "%llu %s", static_cast<unsigned long long>(v), units[u]);
  else
    std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
  return buf;
}

}  // namespace tern
