// Helpers shared by the libFuzzer targets (fuzzers only): a reader that turns the fuzz input into
// a sequence of small values (zeros once the input is used up), FUZZ_CHECK, which names the
// broken invariant on stderr before aborting so a crash report says what went wrong, and
// quiet_logs().
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>

#include "base/log.h"

namespace tern::testing {

/// Consumes the fuzz input front to back; reads past the end yield 0.
class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  [[nodiscard]] bool empty() const { return pos_ >= size_; }
  [[nodiscard]] size_t remaining() const { return empty() ? 0 : size_ - pos_; }
  uint8_t u8() { return empty() ? 0 : data_[pos_++]; }
  /// `n` (≤ 8) little-endian bytes.
  uint64_t le(size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n && i < 8; ++i) v |= uint64_t{u8()} << (8 * i);
    return v;
  }
  uint16_t u16() { return static_cast<uint16_t>(le(2)); }
  uint32_t u32() { return static_cast<uint32_t>(le(4)); }
  uint64_t u64() { return le(8); }
  /// An access width from one byte: 1, 2, 4 or 8 (`max` caps it: 4 for port I/O).
  size_t width(size_t max = 8) {
    size_t w = size_t{1} << (u8() % 4);
    return w > max ? max : w;
  }
  /// The unread rest of the input.
  [[nodiscard]] std::span<const uint8_t> rest() const {
    return empty() ? std::span<const uint8_t>()
                   : std::span<const uint8_t>(data_ + pos_, size_ - pos_);
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

/// Aborts (a libFuzzer crash) naming the expression and line when an invariant does not hold.
#define FUZZ_CHECK(cond)                                                                     \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                          \
    }                                                                                        \
  } while (0)

/// Turns tern's logging off, once: the guest errors a fuzzer provokes would flood its output.
inline void quiet_logs() {
  static const bool done = [] {
    spdlog::set_level(spdlog::level::off);
    return true;
  }();
  (void)done;
}

/// Little-endian value of up to 8 bytes (for comparing reads).
inline uint64_t load_le(std::span<const uint8_t> d) {
  uint64_t v = 0;
  for (size_t i = 0; i < d.size() && i < 8; ++i) v |= uint64_t{d[i]} << (8 * i);
  return v;
}

}  // namespace tern::testing
