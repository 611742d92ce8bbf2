// The 8-bit checksum used by ACPI tables and Intel MP tables: all bytes of a structure, including
// its checksum byte, must sum to zero modulo 256.
#pragma once

#include <cstdint>
#include <numeric>
#include <span>

namespace tern::x86 {

/// Sum of `bytes` modulo 256 (0 for a structure whose checksum is correct).
[[nodiscard]] inline uint8_t byte_sum(std::span<const uint8_t> bytes) {
  return static_cast<uint8_t>(std::accumulate(bytes.begin(), bytes.end(), 0u));
}

/// The checksum byte that makes `bytes` sum to zero, computed with the checksum byte itself
/// still 0 inside `bytes`.
[[nodiscard]] inline uint8_t checksum_for(std::span<const uint8_t> bytes) {
  return static_cast<uint8_t>(0x100 - byte_sum(bytes));
}

}  // namespace tern::x86
