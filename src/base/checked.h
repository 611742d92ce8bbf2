// Overflow-checked arithmetic and alignment helpers for addresses and sizes.
#pragma once

#include <cstdint>
#include <optional>

namespace tern {

/// a + b, or nullopt on unsigned overflow.
[[nodiscard]] constexpr std::optional<uint64_t> checked_add(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

/// a * b, or nullopt on unsigned overflow.
[[nodiscard]] constexpr std::optional<uint64_t> checked_mul(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

/// Rounds `v` down to a multiple of `align` (a power of two).
[[nodiscard]] constexpr uint64_t align_down(uint64_t v, uint64_t align) { return v & ~(align - 1); }

/// Rounds `v` up to a multiple of `align` (a power of two); nullopt on overflow.
[[nodiscard]] constexpr std::optional<uint64_t> align_up(uint64_t v, uint64_t align) {
  auto s = checked_add(v, align - 1);
  if (!s) return std::nullopt;
  return align_down(*s, align);
}

inline constexpr uint64_t KiB = 1024;
inline constexpr uint64_t MiB = 1024 * KiB;
inline constexpr uint64_t GiB = 1024 * MiB;

}  // namespace tern
