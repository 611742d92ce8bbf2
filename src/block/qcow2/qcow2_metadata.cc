#include "block/qcow2/qcow2_metadata.h"

#include <endian.h>

#include <algorithm>
#include <cstring>

namespace tern {

namespace {

constexpr uint64_t kOffsetMask = 0x00fffffffffffe00ull;  // bits 9..55
constexpr uint64_t kCopied = 1ull << 63;
constexpr uint64_t kCompressed = 1ull << 62;
constexpr uint64_t kL1Reserved = 0x7f000000000001ffull;  // bits 0..8, 56..62
constexpr uint64_t kL2Reserved = 0x3f000000000001feull;  // bits 1..8, 56..61
constexpr uint64_t kZeroFlag = 1;

std::string hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

Result<std::vector<uint64_t>> read_be64_table(const Qcow2File& f, uint64_t off, uint64_t n) {
  std::vector<uint64_t> t(n);
  if (n > 0) TRY(f.read(off, t.data(), n * 8));
  for (auto& e : t) e = be64toh(e);
  return t;
}

Result<void> write_be64(Qcow2File& f, uint64_t off, uint64_t v) {
  uint64_t be = htobe64(v);
  return f.write(off, &be, 8);
}

}  // namespace

Qcow2Metadata::Qcow2Metadata(Qcow2File& file, const Qcow2Header& h, std::string what)
    : file_(file), h_(h), what_(std::move(what)) {}

Result<std::unique_ptr<Qcow2Metadata>> Qcow2Metadata::open(Qcow2File& file, const Qcow2Header& h,
                                                           std::string what, bool writable,
                                                           bool sync_metadata,
                                                           uint64_t l2_cache_bytes) {
  std::unique_ptr<Qcow2Metadata> m(new Qcow2Metadata(file, h, std::move(what)));
  m->writable_ = writable;
  m->sync_metadata_ = sync_metadata;
  // Both sizes were checked against the file (and capped) by parse_qcow2_header.
  ASSIGN_OR_RETURN(m->l1_, read_be64_table(file, h.l1_table_offset, h.l1_size));
  ASSIGN_OR_RETURN(m->reftable_,
                   read_be64_table(file, h.refcount_table_offset,
                                   uint64_t{h.refcount_table_clusters} * h.cluster_size / 8));
  ASSIGN_OR_RETURN(m->map_, Qcow2MetadataMap::build(h, m->l1_, m->reftable_, m->what_));
  m->l2_capacity_ = std::max<uint64_t>(4, l2_cache_bytes / h.cluster_size);
  m->next_free_ = (file.size() + h.cluster_size - 1) >> h.cluster_bits;
  m->fresh_from_ = m->next_free_;
  return m;
}

Result<void> Qcow2Metadata::fail_entry(const std::string& why) const {
  return fail(what_, "qcow2 metadata: " + why);
}

Result<void> Qcow2Metadata::fail_overlap(const std::string& role, uint64_t off,
                                         Qcow2MetadataMap::Kind k) const {
  return fail_entry(role + " " + hex(off) + " overlaps " + Qcow2MetadataMap::name(k) +
                    " (metadata overlap; run qemu-img check)");
}

Result<std::vector<uint64_t>*> Qcow2Metadata::l2_table(uint64_t off) {
  if (auto it = l2_index_.find(off); it != l2_index_.end()) {
    ++counters_.l2_hits;
    l2_lru_.splice(l2_lru_.begin(), l2_lru_, it->second);
    return &it->second->second;
  }
  ++counters_.l2_misses;
  const uint64_t cs = h_.cluster_size;
  if (off % cs != 0 || off > file_.size() || cs > file_.size() - off) {
    TRY(fail_entry("L1 entry names L2 table " + hex(off) +
                   ": unaligned or past the end of the file"));
  }
  if (auto k = overlap(off, Qcow2MetadataMap::Kind::kL2); k != Qcow2MetadataMap::Kind::kNone)
    TRY(fail_overlap("L1 entry names L2 table", off, k));
  ASSIGN_OR_RETURN(auto t, read_be64_table(file_, off, cs / 8));
  l2_lru_.emplace_front(off, std::move(t));
  l2_index_[off] = l2_lru_.begin();
  while (l2_lru_.size() > l2_capacity_) {
    l2_index_.erase(l2_lru_.back().first);
    l2_lru_.pop_back();
  }
  return &l2_lru_.front().second;
}

Result<Qcow2Mapping> Qcow2Metadata::lookup(uint64_t gc) {
  const uint64_t l2e = h_.l2_entries();
  const uint64_t l1_index = gc / l2e;
  Qcow2Mapping m;
  if (l1_index >= l1_.size()) {
    TRY(fail_entry("guest cluster " + std::to_string(gc) + " beyond the L1 table"));
  }
  const uint64_t l1e = l1_[l1_index];
  if ((l1e & kL1Reserved) != 0) {
    TRY(fail_entry("L1 entry " + std::to_string(l1_index) + " has reserved bits set (" + hex(l1e) +
                   ")"));
  }
  const uint64_t l2_off = l1e & kOffsetMask;
  if (l2_off == 0) return m;
  ASSIGN_OR_RETURN(std::vector<uint64_t> * table, l2_table(l2_off));
  const uint64_t e = (*table)[gc % l2e];
  const uint64_t cs = h_.cluster_size;
  if ((e & kCompressed) != 0) {
    // Bits 0..x-1: host offset; x..61: additional 512-byte sectors (qcow2.txt, "Compressed
    // Clusters Descriptor"), x = 62 - (cluster_bits - 8).
    const unsigned x = 62 - (h_.cluster_bits - 8);
    m.kind = Qcow2Mapping::Kind::kCompressed;
    m.host = e & ((1ull << x) - 1);
    const uint64_t sectors = (e >> x) & ((1ull << (h_.cluster_bits - 8)) - 1);
    m.compressed_bytes = (sectors + 1) * 512 - (m.host & 511);
    if (m.host >= file_.size() || m.host < cs)
      TRY(fail_entry("compressed cluster at " + hex(m.host) + " outside the file"));
    m.compressed_bytes = std::min(m.compressed_bytes, file_.size() - m.host);
    return m;
  }
  const bool zero_flag = (e & kZeroFlag) != 0;
  if ((e & kL2Reserved) != 0 || (zero_flag && h_.version < 3)) {
    TRY(fail_entry("L2 entry for guest cluster " + std::to_string(gc) + " has reserved bits set (" +
                   hex(e) + ")"));
  }
  m.host = e & kOffsetMask;
  m.copied = (e & kCopied) != 0;
  if (zero_flag) m.kind = Qcow2Mapping::Kind::kZero;
  // A zero cluster may keep a host cluster (preallocated): checked like a data cluster, since a
  // write to it writes that cluster whole.
  if (m.host == 0) return m;
  if (m.host % cs != 0 || m.host > file_.size() || cs > file_.size() - m.host) {
    TRY(fail_entry("L2 entry for guest cluster " + std::to_string(gc) + " names cluster " +
                   hex(m.host) + ": unaligned or past the end of the file"));
  }
  // Data never goes over metadata (QEMU's overlap check): a data cluster is written in place.
  if (auto k = overlap(m.host); k != Qcow2MetadataMap::Kind::kNone)
    TRY(fail_overlap("L2 entry for guest cluster " + std::to_string(gc) + " names data cluster",
                     m.host, k));
  if (!zero_flag) m.kind = Qcow2Mapping::Kind::kData;
  return m;
}

Result<uint64_t> Qcow2Metadata::refblock_for(uint64_t host, bool create, bool* used_host) {
  const uint64_t cs = h_.cluster_size;
  const uint64_t per_block = cs * 8 / h_.refcount_bits();
  const uint64_t c = host >> h_.cluster_bits;
  const uint64_t i = c / per_block;
  *used_host = false;
  if (i >= reftable_.size()) {
    if (!create) return uint64_t{0};
    TRY(grow_reftable(i));
  }
  if ((reftable_[i] & 0x1ff) != 0) {
    TRY(fail_entry("refcount table entry " + std::to_string(i) + " has reserved bits set"));
  }
  uint64_t rb = reftable_[i] & ~uint64_t{0x1ff};
  if (rb != 0) {
    if (rb % cs != 0 || rb > file_.size() || cs > file_.size() - rb || rb < cs)
      TRY(fail_entry("refcount block " + hex(rb) + " unaligned or past the end of the file"));
    if (auto k = overlap(rb, Qcow2MetadataMap::Kind::kRefBlock); k != Qcow2MetadataMap::Kind::kNone)
      TRY(fail_overlap("refcount block", rb, k));
    return rb;
  }
  if (!create) return uint64_t{0};
  if (auto k = overlap(host); k != Qcow2MetadataMap::Kind::kNone)
    TRY(fail_overlap("new refcount block at", host, k));
  // A new refcount block in the cluster `host` itself (covered by this block), counting itself;
  // made durable before the refcount table entry that names it.
  std::vector<uint8_t> block(cs, 0);
  const uint64_t idx = c % per_block, bits = h_.refcount_bits();
  if (bits >= 8)
    block[idx * bits / 8 + bits / 8 - 1] = 1;  // big-endian 1
  else
    block[idx * bits / 8] = static_cast<uint8_t>(1u << ((idx * bits) % 8));
  TRY(file_.write(host, block.data(), cs));
  TRY(sync());
  TRY(write_be64(file_, h_.refcount_table_offset + i * 8, host));
  reftable_[i] = host;
  map_.add_refblock(host);
  ++counters_.allocations;
  *used_host = true;
  return host;
}

Result<void> Qcow2Metadata::grow_reftable(uint64_t need_index) {
  const uint64_t cs = h_.cluster_size, per_block = cs * 8 / h_.refcount_bits();
  const uint64_t per_cluster = cs / 8;
  // The new table and the refcount blocks that count it go past every cluster the old table can
  // cover (no old block counts them) and past the end of the file: table clusters [start,
  // start + n), then blocks [start + n, start + n + b), each block counting the new clusters in
  // its range. n and b grow together until the table indexes every block.
  const uint64_t start = std::max<uint64_t>(next_free_, reftable_.size() * per_block);
  uint64_t n = h_.refcount_table_clusters, b = 0, first = start / per_block;
  for (;;) {
    const uint64_t last = (start + n + b - 1) / per_block;
    const uint64_t entries = std::max(need_index, last) + 1;
    const uint64_t n2 = std::max<uint64_t>(n, (entries + per_cluster - 1) / per_cluster);
    const uint64_t b2 = (start + n2 + b - 1) / per_block - first + 1;
    if (n2 == n && b2 == b) break;
    n = n2;
    b = b2;
  }
  if (n * cs > kQcow2MaxRefTableBytes)
    TRY(fail_entry("refcount table full (" + std::to_string(n * cs) + " bytes needed, at most " +
                   std::to_string(kQcow2MaxRefTableBytes) + "); the image file is at " +
                   std::to_string(file_.size()) + " bytes"));
  if (auto k = map_.find(start * cs, (n + b) * cs); k != Qcow2MetadataMap::Kind::kNone)
    TRY(fail_overlap("new refcount table at", start * cs, k));
  std::vector<uint64_t> table = reftable_;
  table.resize(n * per_cluster, 0);
  const uint64_t bits = h_.refcount_bits();
  for (uint64_t k = 0; k < b; ++k) {
    std::vector<uint8_t> block(cs, 0);
    for (uint64_t c = std::max(start, (first + k) * per_block);
         c < std::min(start + n + b, (first + k + 1) * per_block); ++c) {
      const uint64_t idx = c % per_block;  // refcount 1, as refblock_for() writes it
      if (bits >= 8)
        block[idx * bits / 8 + bits / 8 - 1] = 1;
      else
        block[idx * bits / 8] |= static_cast<uint8_t>(1u << ((idx * bits) % 8));
    }
    const uint64_t at = (start + n + k) * cs;
    TRY(file_.write(at, block.data(), cs));
    table[first + k] = at;
  }
  std::vector<uint64_t> be(table.size());
  for (size_t k = 0; k < table.size(); ++k) be[k] = htobe64(table[k]);
  TRY(file_.write(start * cs, be.data(), be.size() * 8));
  TRY(sync());  // the new table and its blocks durable before the header names them
  uint8_t hdr[12];
  const uint64_t off_be = htobe64(start * cs);
  const uint32_t n_be = htobe32(static_cast<uint32_t>(n));
  std::memcpy(hdr, &off_be, 8);
  std::memcpy(hdr + 8, &n_be, 4);
  TRY(file_.write(48, hdr, sizeof hdr));  // refcount_table_offset and _clusters, one sector
  TRY(sync());
  // The old table's clusters stay counted: leaked, never reused.
  h_.refcount_table_offset = start * cs;
  h_.refcount_table_clusters = static_cast<uint32_t>(n);
  reftable_ = std::move(table);
  map_.move_reftable(start * cs, n);
  for (uint64_t k = 0; k < b; ++k) map_.add_refblock((start + n + k) * cs);
  next_free_ = start + n + b;
  counters_.allocations += n + b;
  return {};
}

Result<void> Qcow2Metadata::start_after_counted() {
  const uint64_t cs = h_.cluster_size, per_block = cs * 8 / h_.refcount_bits();
  uint64_t next = 0;
  std::vector<uint8_t> block(cs);
  for (uint64_t i = 0; i < reftable_.size(); ++i) {
    const uint64_t rb = reftable_[i] & ~uint64_t{0x1ff};
    if (rb == 0) continue;
    if (rb % cs != 0 || rb > file_.size() || cs > file_.size() - rb || rb < cs)
      TRY(fail_entry("refcount block " + hex(rb) + " unaligned or past the end of the file"));
    TRY(file_.read(rb, block.data(), cs));
    for (uint64_t p = cs; p-- > 0;) {
      if (block[p] == 0) continue;
      const unsigned top = 31 - static_cast<unsigned>(__builtin_clz(block[p]));
      next = std::max(next, i * per_block + (p * 8 + top) / h_.refcount_bits() + 1);
      break;
    }
  }
  next_free_ = next;
  fresh_from_ = UINT64_MAX;  // a block device's clusters hold whatever was there before
  return {};
}

Result<uint64_t> Qcow2Metadata::refcount(uint64_t host) {
  bool used = false;
  ASSIGN_OR_RETURN(uint64_t rb, refblock_for(host, false, &used));
  if (rb == 0) return uint64_t{0};
  const uint64_t per_block = h_.cluster_size * 8 / h_.refcount_bits();
  const uint64_t idx = (host >> h_.cluster_bits) % per_block, bits = h_.refcount_bits();
  if (bits < 8) {
    uint8_t b = 0;
    TRY(file_.read(rb + idx * bits / 8, &b, 1));
    return uint64_t{(b >> ((idx * bits) % 8)) & ((1u << bits) - 1)};
  }
  uint8_t buf[8] = {};
  TRY(file_.read(rb + idx * bits / 8, buf, bits / 8));
  uint64_t v = 0;
  for (unsigned k = 0; k < bits / 8; ++k) v = (v << 8) | buf[k];
  return v;
}

Result<void> Qcow2Metadata::set_refcount(uint64_t host, uint64_t value) {
  bool used = false;
  ASSIGN_OR_RETURN(uint64_t rb, refblock_for(host, false, &used));
  TERN_CHECK(rb != 0);
  const uint64_t per_block = h_.cluster_size * 8 / h_.refcount_bits();
  const uint64_t idx = (host >> h_.cluster_bits) % per_block, bits = h_.refcount_bits();
  if (bits < 8) {
    uint8_t b = 0;
    TRY(file_.read(rb + idx * bits / 8, &b, 1));
    const unsigned shift = (idx * bits) % 8;
    const uint8_t mask = static_cast<uint8_t>(((1u << bits) - 1) << shift);
    b = static_cast<uint8_t>((b & ~mask) | ((value << shift) & mask));
    return file_.write(rb + idx * bits / 8, &b, 1);
  }
  uint8_t buf[8] = {};
  for (unsigned k = 0; k < bits / 8; ++k)
    buf[bits / 8 - 1 - k] = static_cast<uint8_t>(value >> (8 * k));
  return file_.write(rb + idx * bits / 8, buf, bits / 8);
}

Result<void> Qcow2Metadata::sync() {
  if (!sync_metadata_) return {};
  return file_.sync();
}

Result<void> Qcow2Metadata::reserve_batch() {
  if (!writable_) TRY(fail_entry("allocation on a read-only image"));
  const uint64_t want = std::clamp<uint64_t>(kQcow2ReserveBytes >> h_.cluster_bits, 1, kQcow2ReserveMax);
  // Handed out only once the sync made them durable (on an error they stay leaked).
  std::vector<uint64_t> batch;
  while (batch.size() < want) {
    const uint64_t host = next_free_ << h_.cluster_bits;
    if (host >= kQcow2MaxVirtualSize) {
      if (!batch.empty()) break;
      TRY(fail_entry("image file full"));
    }
    ++next_free_;
    bool used = false;
    TRY(refblock_for(host, true, &used));
    if (used) continue;  // the cluster became its own refcount block
    ASSIGN_OR_RETURN(uint64_t rc, refcount(host));
    if (rc != 0) continue;  // past the end of the file yet counted: left as it is
    // Refcount 0 yet metadata: corrupt refcounts (e.g. on a block device, where allocation
    // starts inside the file). Fail this request rather than hand out the cluster.
    if (auto k = overlap(host); k != Qcow2MetadataMap::Kind::kNone)
      TRY(fail_overlap("free cluster", host, k));
    TRY(set_refcount(host, 1));
    batch.push_back(host);
  }
  TRY(sync());  // every reserved refcount durable before any L2 entry names one of them
  reserved_.insert(reserved_.end(), batch.begin(), batch.end());
  return {};
}

Result<uint64_t> Qcow2Metadata::allocate_cluster(bool* fresh) {
  if (!writable_) TRY(fail_entry("allocation on a read-only image"));
  if (reserved_.empty()) TRY(reserve_batch());
  const uint64_t host = reserved_.front();
  reserved_.pop_front();
  if (fresh != nullptr) *fresh = (host >> h_.cluster_bits) >= fresh_from_;
  ++counters_.allocations;
  return host;
}

Result<void> Qcow2Metadata::release_reserved() {
  if (reserved_.empty()) return {};
  while (!reserved_.empty()) {
    TRY(set_refcount(reserved_.back(), 0));
    reserved_.pop_back();
  }
  return sync();
}

Result<void> Qcow2Metadata::set_l2(uint64_t gc, uint64_t host, bool zero) {
  const uint64_t l2e = h_.l2_entries();
  const uint64_t l1_index = gc / l2e;
  TERN_CHECK(l1_index < l1_.size());
  const uint64_t cs = h_.cluster_size;
  uint64_t l2_off = l1_[l1_index] & kOffsetMask;
  if (l2_off == 0 || (l1_[l1_index] & kCopied) == 0) {
    // A new L2 table (a copy of a shared one), written and made durable before its L1 entry.
    std::vector<uint64_t> table(l2e, 0);
    if (l2_off != 0) {
      ASSIGN_OR_RETURN(std::vector<uint64_t> * old, l2_table(l2_off));
      table = *old;
    }
    ASSIGN_OR_RETURN(uint64_t fresh, allocate_cluster());
    map_.add_l2(fresh);
    std::vector<uint64_t> be(table.size());
    for (size_t k = 0; k < table.size(); ++k) be[k] = htobe64(table[k]);
    TRY(file_.write(fresh, be.data(), cs));
    TRY(sync());
    TRY(write_be64(file_, h_.l1_table_offset + l1_index * 8, fresh | kCopied));
    l1_[l1_index] = fresh | kCopied;
    l2_off = fresh;
  }
  ASSIGN_OR_RETURN(std::vector<uint64_t> * t, l2_table(l2_off));
  const uint64_t entry = (host != 0 ? host | kCopied : 0) | (zero ? kZeroFlag : 0);
  TRY(write_be64(file_, l2_off + (gc % l2e) * 8, entry));
  (*t)[gc % l2e] = entry;
  return {};
}

}  // namespace tern
