#include "block/bounce_pool.h"

#include <algorithm>
#include <cstdlib>

#include "base/result.h"

namespace tern {

void BouncePool::FreeDeleter::operator()(uint8_t* p) const {
  std::free(p);
}

BouncePool::BouncePool(size_t align, size_t chunk_bytes, unsigned chunks)
    : align_(std::max(align, alignof(std::max_align_t))),
      chunk_bytes_(chunk_bytes),
      slots_(chunks) {
  TERN_CHECK(chunks > 0 && chunk_bytes > 0 && (align_ & (align_ - 1)) == 0 &&
             chunk_bytes % align_ == 0);
}

uint8_t* BouncePool::acquire() {
  for (auto& s : slots_) {
    if (s.busy) continue;
    if (!s.buf) {
      s.buf.reset(static_cast<uint8_t*>(std::aligned_alloc(align_, chunk_bytes_)));
      if (!s.buf) return nullptr;
    }
    s.busy = true;
    ++in_use_;
    return s.buf.get();
  }
  return nullptr;
}

void BouncePool::release(uint8_t* chunk) {
  for (auto& s : slots_) {
    if (s.buf.get() == chunk && s.busy) {
      s.busy = false;
      --in_use_;
      return;
    }
  }
  TERN_CHECK(false);
}

size_t BouncePool::allocated_bytes() const {
  return chunk_bytes_ *
         static_cast<size_t>(std::count_if(slots_.begin(), slots_.end(),
                                           [](const Slot& s) { return s.buf != nullptr; }));
}

}  // namespace tern
