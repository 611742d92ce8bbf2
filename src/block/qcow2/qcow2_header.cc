#include "block/qcow2/qcow2_header.h"

#include <endian.h>

#include <cstring>
#include <vector>

namespace tern {

namespace {

uint32_t be32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return be32toh(v);
}
uint64_t be64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return be64toh(v);
}

constexpr uint32_t kExtEnd = 0;
constexpr uint32_t kExtBackingFormat = 0xe2792aca;
constexpr uint32_t kExtDataFile = 0x44415441;
constexpr uint32_t kExtEncryption = 0x0537be77;

// The incompatible feature names (qcow2.txt, bits 0..4).
constexpr const char* kIncompatNames[] = {"dirty", "corrupt", "external data file",
                                          "compression type", "extended L2 entries"};

}  // namespace

bool has_qcow2_magic(const Qcow2File& file) {
  uint8_t b[4];
  if (file.size() < 4 || !file.read(0, b, 4)) return false;
  return be32(b) == kQcow2Magic;
}

Result<Qcow2Header> parse_qcow2_header(const Qcow2File& file, const std::string& what,
                                       bool writable) {
  auto bad = [&](const std::string& why) { return fail(what, "qcow2 header: " + why); };
  const uint64_t file_size = file.size();
  if (file_size < 72) return bad("file shorter than a qcow2 header (72 bytes)");
  uint8_t h[112] = {};
  TRY(file.read(0, h, file_size < 112 ? 72 : 112));
  Qcow2Header hd;
  if (be32(h) != kQcow2Magic) return bad("no qcow2 magic (QFI\\xfb)");
  hd.version = be32(h + 4);
  if (hd.version != 2 && hd.version != 3)
    return bad("version " + std::to_string(hd.version) + " (tern reads 2 and 3)");
  uint64_t backing_off = be64(h + 8);
  uint32_t backing_len = be32(h + 16);
  hd.cluster_bits = be32(h + 20);
  if (hd.cluster_bits < 9 || hd.cluster_bits > 21)
    return bad("cluster_bits " + std::to_string(hd.cluster_bits) + " not in 9..21");
  hd.cluster_size = uint64_t{1} << hd.cluster_bits;
  hd.size = be64(h + 24);
  if (hd.size > kQcow2MaxVirtualSize) return bad("size " + std::to_string(hd.size) + " above 2^55");
  if (uint32_t crypt = be32(h + 32); crypt != 0)
    return bad("encryption (crypt_method " + std::to_string(crypt) + ") not supported");
  hd.l1_size = be32(h + 36);
  hd.l1_table_offset = be64(h + 40);
  hd.refcount_table_offset = be64(h + 48);
  hd.refcount_table_clusters = be32(h + 56);
  hd.nb_snapshots = be32(h + 60);
  hd.snapshots_offset = be64(h + 64);
  if (hd.version == 3) {
    if (file_size < 112) return bad("file shorter than a version 3 header (112 bytes)");
    hd.incompatible_features = be64(h + 72);
    hd.compatible_features = be64(h + 80);
    hd.autoclear_features = be64(h + 88);
    hd.refcount_order = be32(h + 96);
    hd.header_length = be32(h + 100);
    if (hd.header_length < 104 || hd.header_length % 8 != 0 || hd.header_length > hd.cluster_size)
      return bad("header_length " + std::to_string(hd.header_length) +
                 " (must be a multiple of 8, 104..cluster size)");
    if (hd.refcount_order > 6)
      return bad("refcount_order " + std::to_string(hd.refcount_order) + " not in 0..6");
  }
  // Incompatible features: refused by name unless implemented.
  for (unsigned bit = 0; bit < 64; ++bit) {
    uint64_t m = uint64_t{1} << bit;
    if ((hd.incompatible_features & m) == 0) continue;
    std::string name = bit < 5 ? std::string("'") + kIncompatNames[bit] + "'" : "unknown";
    std::string head = "incompatible feature " + name + " (bit " + std::to_string(bit) + ") set: ";
    if (m == kQcow2IncompatCompression) continue;  // compression_type, checked below
    if (m == kQcow2IncompatDirty) {
      if (!writable) continue;  // reads never use refcounts
      return bad(head + "the refcounts may be stale and tern does not rebuild them; run " +
                 "'qemu-img check -r all' first, or add readonly=on");
    }
    if (m == kQcow2IncompatCorrupt)
      return bad(head + "the image is marked corrupt; run 'qemu-img check -r all' first");
    return bad(head + "not supported by tern");
  }
  if (hd.header_length >= 105) {
    uint8_t ct = h[104];
    bool flagged = (hd.incompatible_features & kQcow2IncompatCompression) != 0;
    if (ct > 1)
      return bad("compression_type " + std::to_string(ct) + " not supported (zlib, zstd)");
    if ((ct != 0) != flagged)
      return bad("compression_type " + std::to_string(ct) +
                 " disagrees with incompatible feature bit 3");
  } else if ((hd.incompatible_features & kQcow2IncompatCompression) != 0) {
    return bad(
        "incompatible feature bit 3 (compression type) set without a compression_type field");
  }
  // Tables: aligned, inside the file, bounded.
  const uint64_t cs = hd.cluster_size;
  auto in_file = [&](uint64_t off, uint64_t len) {
    return off % cs == 0 && off <= file_size && len <= file_size - off;
  };
  // Entries needed: ceil(size / (cluster_size * l2_entries)); no overflow (size <= 2^55).
  uint64_t per_l1 = cs * hd.l2_entries();
  uint64_t l1_needed = hd.size / per_l1 + (hd.size % per_l1 != 0);
  if (uint64_t{hd.l1_size} * 8 > kQcow2MaxL1Bytes)
    return bad("l1_size " + std::to_string(hd.l1_size) + " above " +
               std::to_string(kQcow2MaxL1Bytes / 8) + " entries");
  if (hd.l1_size < l1_needed)
    return bad("l1_size " + std::to_string(hd.l1_size) + " too small for size " +
               std::to_string(hd.size) + " (needs " + std::to_string(l1_needed) + ")");
  if (hd.l1_size > 0 && !in_file(hd.l1_table_offset, uint64_t{hd.l1_size} * 8))
    return bad("l1_table_offset " + std::to_string(hd.l1_table_offset) +
               " unaligned or past the end of the file");
  uint64_t rt_bytes = uint64_t{hd.refcount_table_clusters} * cs;
  if (hd.refcount_table_clusters == 0 || rt_bytes > kQcow2MaxRefTableBytes)
    return bad("refcount_table_clusters " + std::to_string(hd.refcount_table_clusters) +
               " (must be 1.." + std::to_string(kQcow2MaxRefTableBytes / cs) + ")");
  if (!in_file(hd.refcount_table_offset, rt_bytes))
    return bad("refcount_table_offset " + std::to_string(hd.refcount_table_offset) +
               " unaligned or past the end of the file");
  if (hd.nb_snapshots > 0 && !in_file(hd.snapshots_offset, 0))
    return bad("snapshots_offset " + std::to_string(hd.snapshots_offset) +
               " unaligned or past the end of the file");
  // Backing file name: inside the first cluster, no NUL.
  if (backing_off != 0) {
    if (backing_len == 0 || backing_len > 1023 || backing_off > cs ||
        backing_len > cs - backing_off || backing_off + backing_len > file_size)
      return bad("backing_file_offset/backing_file_size outside the first cluster or above 1023");
    hd.backing_file.resize(backing_len);
    TRY(file.read(backing_off, hd.backing_file.data(), backing_len));
    if (hd.backing_file.find('\0') != std::string::npos)
      return bad("backing file name contains a NUL byte");
  }
  // Header extensions: from header_length up to the end of the first cluster.
  uint64_t ext_end = std::min<uint64_t>(cs, file_size);
  if (backing_off != 0) ext_end = std::min(ext_end, backing_off);
  uint64_t off = hd.header_length;
  while (off + 8 <= ext_end) {
    uint8_t eh[8];
    TRY(file.read(off, eh, 8));
    uint32_t type = be32(eh), len = be32(eh + 4);
    if (type == kExtEnd) break;
    off += 8;
    if (len > ext_end - off) return bad("header extension " + std::to_string(type) + " too long");
    if (type == kExtBackingFormat) {
      if (len > 64) return bad("backing format extension longer than 64 bytes");
      hd.backing_format.resize(len);
      TRY(file.read(off, hd.backing_format.data(), len));
    } else if (type == kExtDataFile) {
      return bad("external data file extension: not supported by tern");
    } else if (type == kExtEncryption) {
      return bad("encryption header extension: not supported by tern");
    }
    // Others (feature name table, bitmaps) are not needed to serve the active L1.
    off += (uint64_t{len} + 7) & ~uint64_t{7};
  }
  if (!hd.backing_format.empty() && hd.backing_format != "raw" && hd.backing_format != "qcow2")
    return bad("backing format '" + hd.backing_format + "' not supported (raw, qcow2)");
  return hd;
}

}  // namespace tern
