#include "block/qcow2/qcow2_overlap.h"

#include <algorithm>
#include <cstdio>

namespace tern {

namespace {

constexpr uint64_t kL1OffsetMask = 0x00fffffffffffe00ull;  // bits 9..55
constexpr uint64_t kL1Reserved = 0x7f000000000001ffull;

std::string hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

bool ranges_overlap(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen) {
  return alen > 0 && blen > 0 && a < b + blen && b < a + alen;
}

// True if a cluster index in [first, last] is in the sorted vector `v`.
bool any_in(const std::vector<uint64_t>& v, uint64_t first, uint64_t last) {
  auto it = std::lower_bound(v.begin(), v.end(), first);
  return it != v.end() && *it <= last;
}

}  // namespace

const char* Qcow2MetadataMap::name(Kind k) {
  switch (k) {
    case Kind::kNone:
      return "nothing";
    case Kind::kHeader:
      return "the header";
    case Kind::kL1:
      return "the L1 table";
    case Kind::kRefTable:
      return "the refcount table";
    case Kind::kRefBlock:
      return "a refcount block";
    case Kind::kL2:
      return "an L2 table";
  }
  return "?";
}

Result<Qcow2MetadataMap> Qcow2MetadataMap::build(const Qcow2Header& h,
                                                 const std::vector<uint64_t>& l1,
                                                 const std::vector<uint64_t>& reftable,
                                                 const std::string& what) {
  Qcow2MetadataMap m;
  const uint64_t cs = h.cluster_size;
  m.cluster_bits_ = h.cluster_bits;
  m.l1_off_ = h.l1_table_offset;
  m.l1_bytes_ = uint64_t{h.l1_size} * 8;
  m.rt_off_ = h.refcount_table_offset;
  m.rt_bytes_ = uint64_t{h.refcount_table_clusters} * cs;
  auto overlap_error = [&](const std::string& a, uint64_t off, uint64_t len, Kind b) {
    return fail(what, "qcow2 metadata: " + a + " (" + hex(off) + ", " + std::to_string(len) +
                          " bytes) overlaps " + name(b) + "; run qemu-img check");
  };
  // The tables named by the header, against the header and each other.
  if (Kind k = m.find(m.l1_off_, m.l1_bytes_, Kind::kL1); m.l1_bytes_ > 0 && k != Kind::kNone)
    return overlap_error("the L1 table", m.l1_off_, m.l1_bytes_, k);
  if (Kind k = m.find(m.rt_off_, m.rt_bytes_, Kind::kRefTable); k != Kind::kNone)
    return overlap_error("the refcount table", m.rt_off_, m.rt_bytes_, k);
  // Refcount blocks (aligned ones: the others fail when used), against those and each other.
  for (uint64_t e : reftable) {
    const uint64_t off = e & ~uint64_t{0x1ff};
    if ((e & 0x1ff) == 0 && off != 0 && off % cs == 0) m.refblock_.push_back(off >> h.cluster_bits);
  }
  std::sort(m.refblock_.begin(), m.refblock_.end());
  if (auto dup = std::adjacent_find(m.refblock_.begin(), m.refblock_.end());
      dup != m.refblock_.end())
    return overlap_error("a refcount block", *dup << h.cluster_bits, cs, Kind::kRefBlock);
  for (uint64_t c : m.refblock_) {
    if (Kind k = m.find(c << h.cluster_bits, cs, Kind::kRefBlock); k != Kind::kNone)
      return overlap_error("a refcount block", c << h.cluster_bits, cs, k);
  }
  // L2 tables, against all of the above (two L1 entries may share one: a shared table).
  for (uint64_t e : l1) {
    const uint64_t off = e & kL1OffsetMask;
    if ((e & kL1Reserved) == 0 && off != 0 && off % cs == 0) m.l2_.push_back(off >> h.cluster_bits);
  }
  std::sort(m.l2_.begin(), m.l2_.end());
  m.l2_.erase(std::unique(m.l2_.begin(), m.l2_.end()), m.l2_.end());
  for (uint64_t c : m.l2_) {
    if (Kind k = m.find(c << h.cluster_bits, cs, Kind::kL2); k != Kind::kNone)
      return overlap_error("an L2 table", c << h.cluster_bits, cs, k);
  }
  return m;
}

Qcow2MetadataMap::Kind Qcow2MetadataMap::find(uint64_t off, uint64_t len, Kind self) const {
  if (len == 0) return Kind::kNone;
  const uint64_t cs = uint64_t{1} << cluster_bits_;
  if (self != Kind::kHeader && off < cs) return Kind::kHeader;
  if (self != Kind::kL1 && ranges_overlap(off, len, l1_off_, l1_bytes_)) return Kind::kL1;
  if (self != Kind::kRefTable && ranges_overlap(off, len, rt_off_, rt_bytes_))
    return Kind::kRefTable;
  const uint64_t first = off >> cluster_bits_;
  const uint64_t last = (off + (len - 1)) >> cluster_bits_;  // off + len <= 2^64 for callers
  if (self != Kind::kRefBlock && any_in(refblock_, first, last)) return Kind::kRefBlock;
  if (self != Kind::kL2 && any_in(l2_, first, last)) return Kind::kL2;
  return Kind::kNone;
}

void Qcow2MetadataMap::add_l2(uint64_t off) {
  const uint64_t c = off >> cluster_bits_;
  auto it = std::lower_bound(l2_.begin(), l2_.end(), c);
  if (it == l2_.end() || *it != c) l2_.insert(it, c);
}

void Qcow2MetadataMap::add_refblock(uint64_t off) {
  const uint64_t c = off >> cluster_bits_;
  auto it = std::lower_bound(refblock_.begin(), refblock_.end(), c);
  if (it == refblock_.end() || *it != c) refblock_.insert(it, c);
}

void Qcow2MetadataMap::move_reftable(uint64_t off, uint64_t clusters) {
  rt_off_ = off;
  rt_bytes_ = clusters << cluster_bits_;
}

}  // namespace tern
