#include "virtio/descriptor_chain.h"

#include "virtio/virtio_spec.h"

namespace tern::virtio {

std::string_view chain_error_name(ChainError e) {
  switch (e) {
    case ChainError::kHeadOutOfRange: return "head index out of range";
    case ChainError::kNextOutOfRange: return "next index out of range";
    case ChainError::kTooLong: return "chain longer than the queue (loop?)";
    case ChainError::kBadBuffer: return "buffer not in guest RAM";
    case ChainError::kBadDescriptorTable: return "descriptor table not in guest RAM";
    case ChainError::kIndirectNotNegotiated: return "indirect descriptor not negotiated";
    case ChainError::kIndirectNested: return "nested indirect table";
    case ChainError::kIndirectWithNext: return "indirect descriptor with NEXT";
    case ChainError::kIndirectBadLength: return "bad indirect table length";
    case ChainError::kReadableAfterWritable: return "readable descriptor after writable";
  }
  return "?";
}

namespace {

/// Whether an indirect descriptor's table length is one the walker follows.
bool indirect_length_ok(uint32_t len) {
  return len != 0 && len % sizeof(VirtqDesc) == 0 &&
         len / sizeof(VirtqDesc) <= kMaxIndirectDescriptors;
}

/// Where a walk is: the table it reads (the ring's, then at most one indirect table), the next
/// index in it, and how many of its descriptors were visited (more than it holds is a loop).
struct TableCursor {
  uint64_t table = 0;
  uint32_t size = 0;
  uint32_t index = 0;
  uint32_t visited = 0;
  bool in_indirect = false;

  [[nodiscard]] bool looped() { return ++visited > size; }
  [[nodiscard]] uint64_t desc_gpa() const { return table + uint64_t{index} * sizeof(VirtqDesc); }
  /// Continues in the (checked) indirect table `d` refers to: it replaces the rest of the chain.
  void enter_indirect(const VirtqDesc& d) {
    table = d.addr;
    size = d.len / sizeof(VirtqDesc);
    index = 0;
    visited = 0;
    in_indirect = true;
  }
};

}  // namespace

tl::expected<DescriptorChain, ChainError> walk_descriptor_chain(const GuestMemory& mem,
                                                                uint64_t desc_table_gpa,
                                                                uint16_t queue_size, uint16_t head,
                                                                bool indirect_ok) {
  using Err = tl::unexpected<ChainError>;
  if (head >= queue_size) return Err(ChainError::kHeadOutOfRange);
  DescriptorChain chain;
  chain.head = head;

  TableCursor at{desc_table_gpa, queue_size, head};
  bool seen_writable = false;

  for (;;) {
    // A chain visits each descriptor of a table at most once: more is a loop.
    if (at.looped()) return Err(ChainError::kTooLong);
    auto d = mem.read_obj<VirtqDesc>(at.desc_gpa());
    if (!d) return Err(ChainError::kBadDescriptorTable);

    if (d->flags & VIRTQ_DESC_F_INDIRECT) {
      if (!indirect_ok) return Err(ChainError::kIndirectNotNegotiated);
      if (at.in_indirect) return Err(ChainError::kIndirectNested);
      if (d->flags & VIRTQ_DESC_F_NEXT) return Err(ChainError::kIndirectWithNext);
      if (!indirect_length_ok(d->len)) return Err(ChainError::kIndirectBadLength);
      if (!mem.slice(d->addr, d->len)) return Err(ChainError::kBadBuffer);
      // The indirect descriptor itself is not a buffer.
      at.enter_indirect(*d);
      continue;
    }

    ++chain.descriptors;
    auto host = mem.slice(d->addr, d->len);
    if (!host) return Err(ChainError::kBadBuffer);
    bool writable = (d->flags & VIRTQ_DESC_F_WRITE) != 0;
    if (!writable && seen_writable) return Err(ChainError::kReadableAfterWritable);
    seen_writable = seen_writable || writable;
    chain.segments.push_back(ChainSegment{d->addr, *host, writable});
    (writable ? chain.writable_bytes : chain.readable_bytes) += d->len;

    if (!(d->flags & VIRTQ_DESC_F_NEXT)) return chain;
    if (d->next >= at.size) return Err(ChainError::kNextOutOfRange);
    at.index = d->next;
  }
}

std::optional<ChainSegment> refused_chain_tail(const GuestMemory& mem, uint64_t desc_table_gpa,
                                               uint16_t queue_size, uint16_t head,
                                               bool indirect_ok) {
  if (head >= queue_size) return std::nullopt;
  TableCursor at{desc_table_gpa, queue_size, head};
  for (;;) {
    if (at.looped()) return std::nullopt;  // a loop: no last descriptor
    auto d = mem.read_obj<VirtqDesc>(at.desc_gpa());
    if (!d) return std::nullopt;
    if (d->flags & VIRTQ_DESC_F_INDIRECT) {
      if (!indirect_ok || at.in_indirect || (d->flags & VIRTQ_DESC_F_NEXT) ||
          !indirect_length_ok(d->len))
        return std::nullopt;
      at.enter_indirect(*d);
      continue;
    }
    if (d->flags & VIRTQ_DESC_F_NEXT) {
      if (d->next >= at.size) return std::nullopt;
      at.index = d->next;
      continue;
    }
    if (!(d->flags & VIRTQ_DESC_F_WRITE) || d->len == 0) return std::nullopt;
    auto host = mem.slice(d->addr, d->len);
    if (!host) return std::nullopt;
    return ChainSegment{d->addr, *host, true};
  }
}

}  // namespace tern::virtio
