// Qcow2Metadata: the active L1 table, a bounded LRU cache of L2 tables, the refcount table and
// refcount blocks of one qcow2 image (QEMU docs/interop/qcow2.txt, "Cluster mapping" and
// "Host cluster management"): maps a guest cluster to where its bytes are, and allocates host
// clusters for writes.
//
// Crash-safety ordering (every step a write-through pwrite; "sync" = fdatasync, skipped with
// sync_metadata false, i.e. cache=unsafe, where a host crash may lose the image by definition):
//   1. allocate: refcount 0 -> 1 written (a new refcount block first, made durable, then its
//      refcount table entry), then sync: no L1/L2 entry can reach the disk before the refcount
//      of the cluster it names. Clusters are reserved this way in batches (up to
//      kQcow2ReserveBytes, at most kQcow2ReserveMax clusters: one sync covers the batch; those
//      past the end of the file take no space until written) and handed out from
//      the batch in order; release_reserved() (a clean close) sets the unused ones back to 0, a
//      crash leaks them (refcount 1, unreferenced: what `qemu-img check` calls leaked);
//   2. a new L2 table is written zeroed and synced before its L1 entry is written;
//   3. the caller writes the data cluster before set_l2() writes the L2 entry naming it;
//   4. a guest FLUSH syncs the file, which makes data and every entry above durable.
// A SIGKILL at any point leaves at worst leaked clusters (refcount 1, unreferenced), never an
// entry naming a cluster with refcount 0 or garbage. Clusters are never freed, so no stale
// mapping can name a reused cluster.
//
// Not thread-safe: the owning Qcow2Image holds its mutex around every call.
#pragma once

#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/result.h"
#include "block/qcow2/qcow2_file.h"
#include "block/qcow2/qcow2_header.h"
#include "block/qcow2/qcow2_overlap.h"

namespace tern {

/// What one guest cluster maps to.
struct Qcow2Mapping {
  enum class Kind : uint8_t {
    kUnallocated,  ///< Read from the backing file, or zeros.
    kZero,         ///< v3 zero cluster (L2 bit 0): reads as zeros.
    kData,         ///< `host`: the cluster's offset in the image file.
    kCompressed,   ///< `host`..`host + compressed_bytes`: a deflate/zstd stream.
  };
  Kind kind = Kind::kUnallocated;
  uint64_t host = 0;
  uint64_t compressed_bytes = 0;
  bool copied = false;  ///< QCOW_OFLAG_COPIED: refcount exactly 1, writable in place.
};

/// Metadata cache counters (kept under the owning image's mutex).
struct Qcow2Counters {
  uint64_t l2_hits = 0;
  uint64_t l2_misses = 0;
  uint64_t allocations = 0;  ///< Host clusters allocated (data, L2 tables, refcount blocks).
};

/// Bytes of clusters reserved per refcount sync (a crash leaks at most this much, or
/// kQcow2ReserveMax clusters).
inline constexpr uint64_t kQcow2ReserveBytes = 32u << 20;
inline constexpr uint64_t kQcow2ReserveMax = 512;

class Qcow2Metadata {
 public:
  /// Reads the L1 and refcount tables of `file` (validated `h`). `writable`: allocations allowed.
  /// Refuses an image whose L1 table, refcount table, refcount blocks and L2 tables overlap the
  /// header or each other (Qcow2MetadataMap::build).
  /// `l2_cache_bytes`: budget of the L2 cache (at least 4 tables are kept). Errors start with
  /// `what`.
  [[nodiscard]] static Result<std::unique_ptr<Qcow2Metadata>> open(
      Qcow2File& file, const Qcow2Header& h, std::string what, bool writable, bool sync_metadata,
      uint64_t l2_cache_bytes = 4u << 20);

  /// The mapping of the guest cluster with index `guest_cluster` (< size / cluster_size rounded
  /// up). Errors: an L1/L2 entry with reserved bits set, unaligned, or naming a cluster past the
  /// end of the file or over the image's metadata (header, L1 / refcount table, refcount blocks,
  /// other L2 tables: Qcow2MetadataMap); the request fails, the image stays open.
  [[nodiscard]] Result<Qcow2Mapping> lookup(uint64_t guest_cluster);
  /// Allocates one host cluster (refcount 0 -> 1, durable per the file comment); its offset.
  /// `fresh` (optional): set true when no byte of the cluster was ever written (it lies past the
  /// end the file had at open, on a regular file): its bytes read as zeros.
  [[nodiscard]] Result<uint64_t> allocate_cluster(bool* fresh = nullptr);
  /// Sets the refcounts of reserved, never handed out clusters back to 0 and syncs (a clean
  /// close: no leaks). Later allocations reserve anew.
  [[nodiscard]] Result<void> release_reserved();
  /// Points guest cluster `guest_cluster` at `host` (an allocate_cluster() result whose data is
  /// written, or 0), allocating its L2 table when there is none; an entry with a host carries
  /// QCOW_OFLAG_COPIED. `zero`: the v3 zero flag (the cluster reads as zeros; `host` kept
  /// allocated for a later write).
  [[nodiscard]] Result<void> set_l2(uint64_t guest_cluster, uint64_t host, bool zero = false);
  /// Makes allocation start after the last cluster with a nonzero refcount (reads every refcount
  /// block once) rather than at the end of the file: for an image on a block device, whose end
  /// is the device's. Errors: a refcount table entry naming a block outside the file.
  [[nodiscard]] Result<void> start_after_counted();
  /// The refcount of the host cluster at `host` (0 where no refcount block covers it).
  [[nodiscard]] Result<uint64_t> refcount(uint64_t host);

  [[nodiscard]] const Qcow2Header& header() const { return h_; }
  [[nodiscard]] const Qcow2Counters& counters() const { return counters_; }

 private:
  Qcow2Metadata(Qcow2File& file, const Qcow2Header& h, std::string what);
  /// The L2 table at `off` from the cache (read and validated on a miss).
  Result<std::vector<uint64_t>*> l2_table(uint64_t off);
  Result<void> set_refcount(uint64_t host, uint64_t value);
  /// Offset of the refcount block covering `host`, allocating it (in the cluster `host` itself
  /// when that cluster is free) when `create`; 0 when none and !create.
  /// A larger refcount table (with blocks counting it) past the end of the file, made durable,
  /// then named by the header; large enough for refcount table index `need_index`.
  Result<void> grow_reftable(uint64_t need_index);
  Result<uint64_t> refblock_for(uint64_t host, bool create, bool* used_host);
  Result<void> sync();
  /// The metadata (other than `self`) overlapping the cluster at `off` (Qcow2MetadataMap).
  [[nodiscard]] Qcow2MetadataMap::Kind overlap(
      uint64_t off, Qcow2MetadataMap::Kind self = Qcow2MetadataMap::Kind::kNone) const {
    return map_.find(off, h_.cluster_size, self);
  }
  /// Fails naming the cluster at `off` as `role` and the metadata `k` it overlaps.
  Result<void> fail_overlap(const std::string& role, uint64_t off, Qcow2MetadataMap::Kind k) const;
  /// Reserves the next batch of free clusters (refcount 1, durable) into reserved_.
  Result<void> reserve_batch();
  Result<void> fail_entry(const std::string& why) const;

  Qcow2File& file_;
  Qcow2Header h_;
  std::string what_;
  bool writable_ = false;
  bool sync_metadata_ = true;
  std::vector<uint64_t> l1_;        // host-endian copies of the entries
  std::vector<uint64_t> reftable_;  // host-endian
  Qcow2MetadataMap map_;            // which clusters hold metadata (never written with data)
  // LRU of L2 tables: front = most recently used.
  std::list<std::pair<uint64_t, std::vector<uint64_t>>> l2_lru_;
  std::unordered_map<uint64_t, decltype(l2_lru_)::iterator> l2_index_;
  size_t l2_capacity_ = 4;
  uint64_t next_free_ = 0;  // cluster index where the next allocation search starts
  // Clusters from here on were never written (past the file's end at open; none on a block device).
  uint64_t fresh_from_ = UINT64_MAX;
  std::deque<uint64_t> reserved_;  // host offsets: refcount 1 on disk, not yet handed out
  Qcow2Counters counters_;
};

}  // namespace tern
