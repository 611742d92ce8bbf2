// BouncePool: a fixed budget of aligned bounce buffers for O_DIRECT I/O on guest memory that is
// not aligned as the disk needs. Guest requests never decide how much host memory is bounced:
// each queue owns one pool of `chunks` buffers of `chunk_bytes`, allocated on first use and kept
// until the pool is destroyed, so bounce memory per queue is at most chunks * chunk_bytes
// (4 x 1 MiB by default; docs/limits.md). A request larger than a chunk is copied through its
// chunk piece by piece; a request that finds every chunk busy waits for one.
//
// Not thread-safe: one queue worker owns the pool.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace tern {

class BouncePool {
 public:
  static constexpr size_t kDefaultChunkBytes = size_t{1} << 20;  ///< = virtio-blk size_max
  static constexpr unsigned kDefaultChunks = 4;

  /// `align`: buffer alignment in bytes (a power of two); `chunk_bytes` must be a multiple of
  /// it. Nothing is allocated yet.
  explicit BouncePool(size_t align, size_t chunk_bytes = kDefaultChunkBytes,
                      unsigned chunks = kDefaultChunks);

  /// A free chunk (chunk_bytes() bytes, aligned), or nullptr when every chunk is in use or the
  /// host could not allocate one (then exhausted() tells which).
  [[nodiscard]] uint8_t* acquire();
  /// Returns a chunk from acquire().
  void release(uint8_t* chunk);

  [[nodiscard]] size_t chunk_bytes() const { return chunk_bytes_; }
  /// The budget: the most bytes this pool ever holds (chunks * chunk_bytes).
  [[nodiscard]] size_t budget_bytes() const { return chunk_bytes_ * slots_.size(); }
  /// Bytes allocated so far (<= budget_bytes()).
  [[nodiscard]] size_t allocated_bytes() const;
  [[nodiscard]] unsigned in_use() const { return in_use_; }

 private:
  struct FreeDeleter {
    void operator()(uint8_t* p) const;
  };
  struct Slot {
    std::unique_ptr<uint8_t, FreeDeleter> buf;
    bool busy = false;
  };
  size_t align_;
  size_t chunk_bytes_;
  std::vector<Slot> slots_;
  unsigned in_use_ = 0;
};

}  // namespace tern
