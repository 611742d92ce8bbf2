// ByteWriter / ByteReader: the little-endian byte codec every snapshot section is written with.
//
// Device and KVM state is saved as a flat byte string per section (see state_file.h). Writers
// append fixed-width integers, trivially copyable structs (KVM ABI structs are saved as their raw
// bytes: tern restores on the same host ABI), length-prefixed strings and byte runs. Readers are
// bounds-checked: reading past the end, a length that does not fit, or bytes left over yield an
// Error naming `what` (the section) — never a crash, since snapshot files are user input.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "base/result.h"

namespace tern::snap {

/// Appends values to a growing byte buffer (host byte order = little-endian on x86-64).
class ByteWriter {
 public:
  void u8(uint8_t v) { pod(v); }
  void u16(uint16_t v) { pod(v); }
  void u32(uint32_t v) { pod(v); }
  void u64(uint64_t v) { pod(v); }
  void boolean(bool v) { u8(v ? 1 : 0); }
  /// Raw bytes, no length prefix (the reader must know the length).
  void bytes(std::span<const uint8_t> b) { buf_.insert(buf_.end(), b.begin(), b.end()); }
  /// u32 length + bytes.
  void blob(std::span<const uint8_t> b) {
    u32(static_cast<uint32_t>(b.size()));
    bytes(b);
  }
  /// u32 length + UTF-8 bytes.
  void string(std::string_view s) {
    blob(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
  }
  /// The raw bytes of a trivially copyable value (e.g. a KVM ABI struct).
  template <class T>
  void pod(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    buf_.insert(buf_.end(), p, p + sizeof(T));
  }

  [[nodiscard]] const std::vector<uint8_t>& data() const { return buf_; }
  [[nodiscard]] std::vector<uint8_t> take() { return std::move(buf_); }

 private:
  std::vector<uint8_t> buf_;
};

/// Reads values back from a byte span; every read is bounds-checked.
class ByteReader {
 public:
  /// `what` names the data in errors, e.g. "state section serial".
  ByteReader(std::span<const uint8_t> data, std::string what)
      : data_(data), what_(std::move(what)) {}

  Result<uint8_t> u8() { return pod<uint8_t>(); }
  Result<uint16_t> u16() { return pod<uint16_t>(); }
  Result<uint32_t> u32() { return pod<uint32_t>(); }
  Result<uint64_t> u64() { return pod<uint64_t>(); }
  Result<bool> boolean() {
    ASSIGN_OR_RETURN(uint8_t v, u8());
    if (v > 1) return fail(what_, "bad boolean value " + std::to_string(v));
    return v == 1;
  }
  /// Exactly `n` raw bytes (a view into the input).
  Result<std::span<const uint8_t>> bytes(size_t n) {
    if (n > remaining()) return truncated(n);
    auto s = data_.subspan(pos_, n);
    pos_ += n;
    return s;
  }
  /// A u32-length-prefixed byte run, refused when longer than `max`.
  Result<std::vector<uint8_t>> blob(size_t max = SIZE_MAX) {
    ASSIGN_OR_RETURN(uint32_t n, u32());
    if (n > max) return fail(what_, "length " + std::to_string(n) + " exceeds " + std::to_string(max));
    ASSIGN_OR_RETURN(auto s, bytes(n));
    return std::vector<uint8_t>(s.begin(), s.end());
  }
  /// A u32-length-prefixed string, refused when longer than `max` bytes.
  Result<std::string> string(size_t max = 4096) {
    ASSIGN_OR_RETURN(auto b, blob(max));
    return std::string(b.begin(), b.end());
  }
  template <class T>
  Result<T> pod() {
    static_assert(std::is_trivially_copyable_v<T>);
    if (sizeof(T) > remaining()) return truncated(sizeof(T));
    T v;
    std::memcpy(&v, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  [[nodiscard]] size_t remaining() const { return data_.size() - pos_; }
  [[nodiscard]] const std::string& what() const { return what_; }
  /// Error unless every byte was consumed (a section longer than its version defines is corrupt).
  Result<void> expect_end() const {
    if (remaining() != 0)
      return fail(what_, std::to_string(remaining()) + " unexpected trailing byte(s)");
    return {};
  }

 private:
  tl::unexpected<Error> truncated(size_t want) const {
    return fail(what_, "truncated: needs " + std::to_string(want) + " more byte(s) at offset " +
                           std::to_string(pos_) + ", has " + std::to_string(remaining()));
  }
  std::span<const uint8_t> data_;
  size_t pos_ = 0;
  std::string what_;
};

}  // namespace tern::snap
