#include "base/host_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <utility>

namespace tern {

namespace {

/// The host page size in bytes (sysconf, read once).
size_t page_size() {
  static const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return page;
}

/// `bytes` rounded up to a page multiple; the caller has ruled out overflow.
size_t round_up_to_page(size_t bytes) {
  const size_t page = page_size();
  return (bytes + page - 1) / page * page;
}

}  // namespace

HostBuffer::HostBuffer(HostBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      mapped_(std::exchange(other.mapped_, 0)) {}

HostBuffer& HostBuffer::operator=(HostBuffer&& other) noexcept {
  if (this != &other) {
    HostBuffer old(std::move(*this));  // unmapped at the end of this scope
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapped_ = std::exchange(other.mapped_, 0);
  }
  return *this;
}

HostBuffer::~HostBuffer() {
  if (mapped_ != 0) ::munmap(data_, mapped_);
}

Result<HostBuffer> HostBuffer::allocate(size_t bytes) {
  HostBuffer buf;
  if (bytes == 0) return buf;
  if (bytes > SIZE_MAX - page_size())
    return fail_code(ENOMEM, "mmap", std::to_string(bytes) + " bytes");
  const size_t len = round_up_to_page(bytes);
  void* p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return fail_errno("mmap", std::to_string(bytes) + " bytes");
  buf.data_ = static_cast<uint8_t*>(p);
  buf.size_ = bytes;
  buf.mapped_ = len;
  return buf;
}

void HostBuffer::shrink(size_t bytes) {
  TERN_CHECK(bytes <= size_);
  const size_t keep = round_up_to_page(bytes);
  if (keep < mapped_) {
    // munmap of a range inside our own mapping only fails on bad arguments, which would be a bug.
    TERN_CHECK(::munmap(data_ + keep, mapped_ - keep) == 0);
    mapped_ = keep;
  }
  size_ = bytes;
  if (mapped_ == 0) data_ = nullptr;
}

}  // namespace tern
