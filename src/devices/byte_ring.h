// ByteRing: a fixed-capacity FIFO of bytes (no allocation after construction).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace tern {

/// A bounded byte FIFO. push() stores what fits and reports how much; nothing ever grows.
/// Not thread-safe: the owner locks.
class ByteRing {
 public:
  /// `capacity` must be at least 1.
  explicit ByteRing(size_t capacity);

  /// Appends as many bytes of `data` as fit; returns how many were stored.
  size_t push(std::span<const uint8_t> data);
  /// Appends one byte if there is room.
  bool push(uint8_t byte) { return push(std::span<const uint8_t>(&byte, 1)) == 1; }
  /// Moves up to out.size() bytes from the front into `out`; returns how many.
  size_t pop(std::span<uint8_t> out);
  /// Removes and returns the front byte. Precondition: !empty().
  uint8_t pop_front();

  void clear() { head_ = size_ = 0; }
  /// The stored bytes, front first (for snapshots).
  [[nodiscard]] std::vector<uint8_t> contents() const;
  [[nodiscard]] size_t size() const { return size_; }
  [[nodiscard]] size_t capacity() const { return buf_.size(); }
  [[nodiscard]] size_t free() const { return buf_.size() - size_; }
  [[nodiscard]] bool empty() const { return size_ == 0; }

 private:
  std::vector<uint8_t> buf_;
  size_t head_ = 0;  // index of the front byte
  size_t size_ = 0;
};

}  // namespace tern
