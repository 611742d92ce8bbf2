// Qcow2MetadataMap: which host clusters of a qcow2 image hold its metadata (the header, the
// active L1 table, the refcount table, the refcount blocks and L2 tables these name), so that no
// guest data is ever written over metadata and no metadata is read from or written into another
// table. The same idea as QEMU's "overlap check" (qcow2-refcount.c,
// qcow2_check_metadata_overlap): every cluster tern is about to write data to, or to use as a
// table, is checked against the map first.
//
// Where overlaps are caught:
//   - at open (build()): the L1 table, the refcount table, and every L2 table / refcount block
//     the two name, against the header and each other: the image is refused, naming both;
//   - per request (find()): a data cluster named by an L2 entry, or one allocate_cluster() picked
//     (corrupt refcounts can call a metadata cluster free), over any metadata fails that request.
// Two L1 entries naming the same L2 table are not an overlap (a shared table, refcount 2: it is
// copied before a write). Not covered: the snapshot table and inactive (snapshot) L1/L2 tables,
// which tern never writes and whose clusters keep refcounts >= 1.
//
// Memory: one sorted vector of cluster indices per kind, at most one entry per L1 / refcount
// table entry (so bounded by the tables' caps: 32 MiB and 8 MiB).
// Not thread-safe: used under the owning image's mutex, like Qcow2Metadata.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "block/qcow2/qcow2_header.h"

namespace tern {

class Qcow2MetadataMap {
 public:
  enum class Kind : uint8_t { kNone, kHeader, kL1, kRefTable, kRefBlock, kL2 };

  /// Builds the map of `h` with its active L1 table `l1` and refcount table `reftable`
  /// (host-endian entries). Entries with reserved bits set are left out (lookups fail them).
  /// Errors (starting with `what`): two of header / L1 table / refcount table / refcount blocks /
  /// L2 tables overlapping, e.g. "img: qcow2 metadata: the L1 table (0x10000, 512 bytes)
  /// overlaps the refcount table (0x10000, 65536 bytes); run qemu-img check".
  [[nodiscard]] static Result<Qcow2MetadataMap> build(const Qcow2Header& h,
                                                      const std::vector<uint64_t>& l1,
                                                      const std::vector<uint64_t>& reftable,
                                                      const std::string& what);

  /// The metadata overlapping host bytes [off, off + len) (len > 0), other than `self` (a table
  /// checked against everything but its own kind); kNone when there is none.
  [[nodiscard]] Kind find(uint64_t off, uint64_t len, Kind self = Kind::kNone) const;

  /// Records a new L2 table / refcount block (one cluster at `off`).
  void add_l2(uint64_t off);
  void add_refblock(uint64_t off);
  /// The refcount table moved to `off`, `clusters` long (the old one is leaked: its clusters keep
  /// their refcounts and are never handed out again).
  void move_reftable(uint64_t off, uint64_t clusters);

  /// "the header", "the L1 table", ... for error messages.
  [[nodiscard]] static const char* name(Kind k);

 private:
  uint64_t cluster_bits_ = 9;
  uint64_t l1_off_ = 0, l1_bytes_ = 0;
  uint64_t rt_off_ = 0, rt_bytes_ = 0;
  std::vector<uint64_t> l2_;        // sorted, unique cluster indices
  std::vector<uint64_t> refblock_;  // sorted, unique cluster indices
};

}  // namespace tern
