#include "devices/byte_ring.h"

#include <algorithm>
#include <cstring>

#include "base/result.h"

namespace tern {

ByteRing::ByteRing(size_t capacity) : buf_(capacity) {
  TERN_CHECK(capacity > 0);
}

size_t ByteRing::push(std::span<const uint8_t> data) {
  size_t n = std::min(data.size(), free());
  size_t tail = (head_ + size_) % buf_.size();
  size_t first = std::min(n, buf_.size() - tail);
  if (first > 0) std::memcpy(buf_.data() + tail, data.data(), first);
  if (n > first) std::memcpy(buf_.data(), data.data() + first, n - first);
  size_ += n;
  return n;
}

size_t ByteRing::pop(std::span<uint8_t> out) {
  size_t n = std::min(out.size(), size_);
  size_t first = std::min(n, buf_.size() - head_);
  if (first > 0) std::memcpy(out.data(), buf_.data() + head_, first);
  if (n > first) std::memcpy(out.data() + first, buf_.data(), n - first);
  head_ = (head_ + n) % buf_.size();
  size_ -= n;
  return n;
}

std::vector<uint8_t> ByteRing::contents() const {
  std::vector<uint8_t> out(size_);
  for (size_t i = 0; i < size_; ++i) out[i] = buf_[(head_ + i) % buf_.size()];
  return out;
}

uint8_t ByteRing::pop_front() {
  TERN_CHECK(size_ > 0);
  uint8_t b = buf_[head_];
  head_ = (head_ + 1) % buf_.size();
  --size_;
  return b;
}

}  // namespace tern
