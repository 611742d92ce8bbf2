// HostBuffer: a move-only byte buffer backed by its own anonymous mapping (mmap/munmap), for large
// transient data (a decompressed kernel, a staged image) that must go back to the OS the moment it
// is dropped — glibc's heap may keep a freed large block resident (dynamic mmap threshold).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "base/result.h"

namespace tern {

/// A zero-filled, read/write anonymous mapping of `size()` bytes (host-virtual memory), unmapped
/// by the destructor. Size 0 holds no mapping. Not copyable.
class HostBuffer {
 public:
  HostBuffer() = default;
  HostBuffer(HostBuffer&& other) noexcept;
  HostBuffer& operator=(HostBuffer&& other) noexcept;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  ~HostBuffer();

  /// Maps `bytes` bytes (rounded up to pages internally). Errors: op "mmap" with the size and errno.
  [[nodiscard]] static Result<HostBuffer> allocate(size_t bytes);

  /// Shrinks the visible size to `bytes` (<= size()), unmapping whole pages past it.
  void shrink(size_t bytes);

  [[nodiscard]] std::span<uint8_t> bytes() { return {data_, size_}; }
  [[nodiscard]] std::span<const uint8_t> bytes() const { return {data_, size_}; }
  [[nodiscard]] size_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;  ///< Bytes actually mapped (page multiple).
};

}  // namespace tern
