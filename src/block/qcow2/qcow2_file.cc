#include "block/qcow2/qcow2_file.h"

#include <unistd.h>

#include <cstring>

namespace tern {

FdQcow2File::FdQcow2File(UniqueFd fd, std::string name, uint64_t size)
    : fd_(std::move(fd)), name_(std::move(name)), size_(size) {}

Result<void> FdQcow2File::read(uint64_t off, void* buf, size_t n) const {
  auto* p = static_cast<uint8_t*>(buf);
  while (n > 0) {
    ssize_t r = retry_eintr([&] { return ::pread(fd_.get(), p, n, static_cast<off_t>(off)); });
    if (r < 0) return fail_errno("pread", name_);
    if (r == 0) return fail("pread", name_ + ": range past the end of the file");
    p += r;
    off += static_cast<uint64_t>(r);
    n -= static_cast<size_t>(r);
  }
  return {};
}

Result<void> FdQcow2File::write(uint64_t off, const void* buf, size_t n) {
  const auto* p = static_cast<const uint8_t*>(buf);
  uint64_t end = off + n;
  while (n > 0) {
    ssize_t r = retry_eintr([&] { return ::pwrite(fd_.get(), p, n, static_cast<off_t>(off)); });
    if (r < 0) return fail_errno("pwrite", name_);
    p += r;
    off += static_cast<uint64_t>(r);
    n -= static_cast<size_t>(r);
  }
  note_end(end);
  return {};
}

void FdQcow2File::note_end(uint64_t end) {
  uint64_t cur = size_.load(std::memory_order_relaxed);
  while (end > cur && !size_.compare_exchange_weak(cur, end, std::memory_order_relaxed)) {
  }
}

uint64_t FdQcow2File::size() const {
  return size_.load(std::memory_order_relaxed);
}

Result<void> FdQcow2File::grow_to(uint64_t size) {
  if (size <= this->size()) return {};
  const uint8_t zero = 0;
  return write(size - 1, &zero, 1);
}

Result<void> FdQcow2File::sync() {
  if (retry_eintr([&] { return ::fdatasync(fd_.get()); }) != 0)
    return fail_errno("fdatasync", name_);
  return {};
}

Result<void> MemQcow2File::read(uint64_t off, void* buf, size_t n) const {
  if (off > bytes_.size() || n > bytes_.size() - off)
    return fail("read", "range past the end of the file");
  if (n > 0) std::memcpy(buf, bytes_.data() + off, n);
  return {};
}

Result<void> MemQcow2File::grow_to(uint64_t size) {
  const uint8_t zero = 0;
  return size <= bytes_.size() ? Result<void>{} : write(size - 1, &zero, 1);
}

Result<void> MemQcow2File::write(uint64_t off, const void* buf, size_t n) {
  if (off > max_size_ || n > max_size_ - off)
    return fail("write", "past the in-memory file's limit");
  if (off + n > bytes_.size()) bytes_.resize(off + n);
  if (n > 0) std::memcpy(bytes_.data() + off, buf, n);
  return {};
}

}  // namespace tern
