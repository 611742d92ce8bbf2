// Qcow2File: the random-access byte file a qcow2 image lives in, as the qcow2 layer sees it:
// positioned reads and writes of whole ranges, the size, and a data sync. FdQcow2File serves an
// fd (buffered I/O: metadata never goes through O_DIRECT); MemQcow2File a byte vector (fuzzers
// and unit tests).
//
// Thread-safety: FdQcow2File's calls are pread/pwrite and may be made from any thread
// (its size is an atomic maximum); MemQcow2File is not thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "base/fd.h"
#include "base/result.h"

namespace tern {

class Qcow2File {
 public:
  virtual ~Qcow2File() = default;
  /// Reads exactly `n` bytes at `off`; a range past the end of the file is an error.
  [[nodiscard]] virtual Result<void> read(uint64_t off, void* buf, size_t n) const = 0;
  /// Writes exactly `n` bytes at `off` (growing the file as needed).
  [[nodiscard]] virtual Result<void> write(uint64_t off, const void* buf, size_t n) = 0;
  /// Current size in bytes.
  [[nodiscard]] virtual uint64_t size() const = 0;
  /// Makes the file at least `size` bytes long: writes a zero byte at `size - 1` when the file is
  /// shorter (that byte must be the caller's; never shrinks the file, whatever other threads
  /// write meanwhile). The bytes before it that no write reached read as zeros.
  [[nodiscard]] virtual Result<void> grow_to(uint64_t size) = 0;
  /// Makes completed writes durable (fdatasync).
  [[nodiscard]] virtual Result<void> sync() = 0;
};

/// A Qcow2File over an fd it owns. `name` (the path) starts error messages.
class FdQcow2File final : public Qcow2File {
 public:
  FdQcow2File(UniqueFd fd, std::string name, uint64_t size);
  Result<void> read(uint64_t off, void* buf, size_t n) const override;
  Result<void> write(uint64_t off, const void* buf, size_t n) override;
  uint64_t size() const override;
  Result<void> grow_to(uint64_t size) override;
  Result<void> sync() override;

 private:
  void note_end(uint64_t end);

  UniqueFd fd_;
  std::string name_;
  std::atomic<uint64_t> size_;  // grown by write() and grow_to() (an atomic maximum)
};

/// A Qcow2File in memory (at most `max_size` bytes: writes past it fail).
class MemQcow2File final : public Qcow2File {
 public:
  explicit MemQcow2File(std::vector<uint8_t> bytes, uint64_t max_size = 64u << 20)
      : bytes_(std::move(bytes)), max_size_(max_size) {}
  Result<void> read(uint64_t off, void* buf, size_t n) const override;
  Result<void> write(uint64_t off, const void* buf, size_t n) override;
  uint64_t size() const override { return bytes_.size(); }
  Result<void> grow_to(uint64_t size) override;
  Result<void> sync() override { return {}; }
  [[nodiscard]] const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
  uint64_t max_size_;
};

}  // namespace tern
