// Short human-readable numbers for the stats tables ("12.3k", "4.56M", "7").
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <string>

namespace tern::stats_text {

/// `v` with a k/M/G suffix from 10^4 on; integers without decimals, others with one; negative
/// values with a "-" before; NaN as "-" (the integer test below was a float-to-integer
/// conversion of a negative or NaN value: undefined behaviour).
inline std::string human(double v) {
  if (std::isnan(v)) return "-";
  if (v < 0) return "-" + human(-v);
  if (v >= 1e9) return fmt::format("{:.2f}G", v / 1e9);
  if (v >= 1e6) return fmt::format("{:.2f}M", v / 1e6);
  if (v >= 1e4) return fmt::format("{:.1f}k", v / 1e3);
  if (v == static_cast<double>(static_cast<uint64_t>(v)))
    return fmt::format("{}", static_cast<uint64_t>(v));
  return fmt::format("{:.1f}", v);
}

}  // namespace tern::stats_text
