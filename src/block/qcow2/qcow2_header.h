// Qcow2Header: the validated header of a qcow2 image (QEMU docs/interop/qcow2.txt, "Header" and
// "Header extensions"), versions 2 and 3. parse_qcow2_header() checks every field against the
// file size and for overflow before anything is read through it, and refuses by name what tern
// does not implement, so a hostile image fails at open, never half-supported.
#pragma once

#include <cstdint>
#include <string>

#include "base/result.h"
#include "block/qcow2/qcow2_file.h"

namespace tern {

/// "QFI\xfb", big-endian at offset 0.
inline constexpr uint32_t kQcow2Magic = 0x514649fb;
/// Largest L1 table tern reads: 32 MiB (QEMU's QCOW_MAX_L1_SIZE), i.e. 4 Mi entries.
inline constexpr uint64_t kQcow2MaxL1Bytes = 32u << 20;
/// Largest refcount table tern reads: 8 MiB (QEMU's QCOW_MAX_REFTABLE_SIZE).
inline constexpr uint64_t kQcow2MaxRefTableBytes = 8u << 20;
/// Largest virtual disk: 2^55 bytes (offsets in L2 entries have 56 bits).
inline constexpr uint64_t kQcow2MaxVirtualSize = uint64_t{1} << 55;

// Incompatible feature bits (header offset 72).
inline constexpr uint64_t kQcow2IncompatDirty = 1u << 0;
inline constexpr uint64_t kQcow2IncompatCorrupt = 1u << 1;
inline constexpr uint64_t kQcow2IncompatDataFile = 1u << 2;
inline constexpr uint64_t kQcow2IncompatCompression = 1u << 3;
inline constexpr uint64_t kQcow2IncompatExtendedL2 = 1u << 4;

/// The fields tern uses, validated (see parse_qcow2_header).
struct Qcow2Header {
  uint32_t version = 0;          ///< 2 or 3.
  uint32_t cluster_bits = 0;     ///< 9..21.
  uint64_t cluster_size = 0;     ///< 1 << cluster_bits.
  uint64_t size = 0;             ///< Virtual disk size in bytes.
  uint32_t l1_size = 0;          ///< L1 entries (enough for `size`).
  uint64_t l1_table_offset = 0;  ///< Cluster-aligned, inside the file.
  uint64_t refcount_table_offset = 0;
  uint32_t refcount_table_clusters = 0;
  uint32_t nb_snapshots = 0;
  uint64_t snapshots_offset = 0;
  uint64_t incompatible_features = 0;
  uint64_t compatible_features = 0;
  uint64_t autoclear_features = 0;
  uint32_t refcount_order = 4;  ///< 0..6: refcounts of 1 << refcount_order bits.
  uint32_t header_length = 72;
  std::string backing_file;    ///< Empty: none. At most 1023 bytes, no NUL.
  std::string backing_format;  ///< Header extension 0xe2792aca; empty when absent.

  [[nodiscard]] uint64_t l2_entries() const { return cluster_size / 8; }
  [[nodiscard]] uint32_t refcount_bits() const { return 1u << refcount_order; }
};

/// Reads and validates the header of `file` (its first cluster). Errors start with `what` (the
/// --disk field, e.g. "--disk path=/x.qcow2") and name the header field or feature:
/// "... : qcow2 incompatible feature 'dirty' (bit 0) set: ... not supported; run qemu-img check -r
/// all" and so on. Checks: magic, version 2|3, cluster_bits 9..21, size <= 2^55, L1 big enough for
/// the size and at most kQcow2MaxL1Bytes, L1 and refcount table aligned, inside the file, no
/// overflow, refcount table at most kQcow2MaxRefTableBytes, refcount_order 0..6 (v2: 4),
/// header_length, header extensions inside the first cluster, backing file name inside the first
/// cluster, encryption, unknown incompatible bits, external data file, extended L2, corrupt, dirty
/// (when `writable`; a read-only open may read a dirty image: reads never use refcounts) refused
/// by name. zstd compression_type is accepted (compressed clusters are read with libzstd).
[[nodiscard]] Result<Qcow2Header> parse_qcow2_header(const Qcow2File& file, const std::string& what,
                                                     bool writable);

/// True if `file` starts with the qcow2 magic (a file shorter than 4 bytes does not).
[[nodiscard]] bool has_qcow2_magic(const Qcow2File& file);

}  // namespace tern
