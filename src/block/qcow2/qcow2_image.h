// Qcow2Image: one opened qcow2 image with its backing chain: what the block executor asks to turn
// a guest read/write into host extents (map()), and the synchronous paths for everything that is
// not a plain read/write of an allocated cluster: zeros, backing-file reads, compressed clusters
// (deflate; zstd where compression_type says so) and allocating writes (copy-on-write of the rest
// of the cluster from the backing file, none for a never-written cluster whose old contents are
// zeros; data written before the L2 entry; Qcow2Metadata's file comment has the ordering).
//
// Thread-safe: every queue worker of a disk shares one image; one mutex covers the metadata (so
// a cluster is never handed out twice); the data of reads and writes moves outside it. A guest
// cluster being allocated is marked until its L2 entry is written: other writers of it (and
// zeroing) wait and then find it allocated. Host extents from map() stay valid: clusters are
// never freed or moved while the image is open.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "base/result.h"
#include "block/qcow2/qcow2_file.h"
#include "block/qcow2/qcow2_header.h"
#include "block/qcow2/qcow2_metadata.h"

namespace tern {

/// A read-only byte source a qcow2 image reads unallocated clusters from: a raw or qcow2 backing
/// file. Reads past its size return zeros.
class BackingReader {
 public:
  virtual ~BackingReader() = default;
  [[nodiscard]] virtual Result<void> read_at(uint64_t off, uint8_t* buf, uint64_t len) = 0;
};

/// The directory part of `path` ("." when it has none, "/" for a file in the root): where a
/// relative backing file name is looked up.
[[nodiscard]] std::string directory_of(const std::string& path);

/// How to open an image (and its chain).
struct Qcow2OpenOptions {
  std::string what;  ///< How errors name the image ("--disk path=/x.qcow2").
  bool writable = false;
  bool backing_files = false;  ///< --disk backing_files=on: open the backing chain.
  bool sync_metadata = true;   ///< false with cache=unsafe (no fdatasync between steps).
  bool lock_backing = true;    ///< Read-lock backing files (--disk locking).
  unsigned max_chain = 16;     ///< Longest backing chain (this image included).
  /// The image is a block device: its size is the device's, so allocation starts after the last
  /// cluster the refcounts count instead of at the end.
  bool block_device = false;
};

/// One piece of a guest request.
struct Qcow2Extent {
  uint64_t guest_off = 0;
  uint64_t len = 0;
  /// True: the bytes live at `host` in the image file (read or write them there directly).
  /// False: go through read_sync()/write_sync() for this piece.
  bool direct = false;
  uint64_t host = 0;
  /// A read's piece that reads as zeros (a v3 zero cluster, or unallocated without a backing
  /// file): the caller fills the buffer itself (direct is false).
  bool zero = false;
};

/// Counters for `tern stat` (a copy taken under the lock).
struct Qcow2Stats {
  uint64_t l2_hits = 0, l2_misses = 0, allocations = 0;
};

class Qcow2Image final : public BackingReader {
 public:
  /// Opens the image in `file` (validated header and tables; Qcow2Metadata). A backing file is
  /// opened only with options.backing_files (else refused naming "--disk backing_files"),
  /// read-only, relative names from `dir` (the image's directory); its format is the header's
  /// backing format, or probed. A chain longer than max_chain or naming an image already in it
  /// (by device and inode) is refused. `chain` carries the (st_dev, st_ino) pairs seen so far.
  [[nodiscard]] static Result<std::unique_ptr<Qcow2Image>> open(
      std::unique_ptr<Qcow2File> file, const std::string& dir, const Qcow2OpenOptions& options,
      std::vector<std::pair<uint64_t, uint64_t>> chain = {});

  /// Gives the clusters reserved for allocations back (Qcow2Metadata::release_reserved).
  ~Qcow2Image() override;
  Qcow2Image(const Qcow2Image&) = delete;
  Qcow2Image& operator=(const Qcow2Image&) = delete;

  /// Virtual disk size in bytes.
  [[nodiscard]] uint64_t size() const { return header_.size; }
  [[nodiscard]] const Qcow2Header& header() const { return header_; }
  [[nodiscard]] bool has_backing() const { return backing_ != nullptr; }

  /// Splits [off, off + len) (inside size()) into extents, merged where contiguous. For a write
  /// (`write`), only clusters allocated with QCOW_OFLAG_COPIED are direct; for a read, clusters
  /// that read as zeros are `zero`.
  [[nodiscard]] Result<void> map(uint64_t off, uint64_t len, bool write,
                                 std::vector<Qcow2Extent>& out);
  /// Reads [off, off + len) whatever its clusters are (zeros past size()).
  [[nodiscard]] Result<void> read_sync(uint64_t off, uint8_t* buf, uint64_t len);
  Result<void> read_at(uint64_t off, uint8_t* buf, uint64_t len) override {
    return read_sync(off, buf, len);
  }
  /// Writes [off, off + len), allocating clusters as needed (see the file comment).
  [[nodiscard]] Result<void> write_sync(uint64_t off, const uint8_t* buf, uint64_t len);
  /// Zeroes [off, off + len) (DISCARD and WRITE_ZEROES): clusters that already read as zeros are
  /// left alone; whole clusters of a v3 image get the zero flag; the rest are written with zeros.
  [[nodiscard]] Result<void> write_zeroes(uint64_t off, uint64_t len);
  /// fdatasync of the image file (data and metadata: one inode).
  [[nodiscard]] Result<void> flush();
  [[nodiscard]] Qcow2Stats stats();
  /// The refcount of the host cluster at byte offset `host` (tests; 0 where no block counts it).
  [[nodiscard]] Result<uint64_t> host_refcount(uint64_t host);

  /// Test hook (crash tests): called with a step name ("refcount", "data", "l2") after each step
  /// of an allocating write. Not for production use.
  void set_step_hook(void (*hook)(const char* step)) { hook_ = hook; }

 private:
  Qcow2Image() = default;
  Result<void> read_cluster_piece(const Qcow2Mapping& m, uint64_t off, uint8_t* buf, uint64_t len);
  Result<void> read_compressed(const Qcow2Mapping& m, std::vector<uint8_t>& cluster);
  /// A writable open clears the autoclear feature bits (none implemented) before any write.
  Result<void> clear_autoclear(const Qcow2OpenOptions& o);
  Result<void> write_cluster(uint64_t gc, uint64_t in_off, const uint8_t* buf, uint64_t len);
  /// The mapping of guest cluster `gc` once no allocating write of it is in flight (`lock`
  /// holds mu_; released while waiting).
  Result<Qcow2Mapping> settled_lookup(std::unique_lock<std::mutex>& lock, uint64_t gc);

  std::mutex mu_;
  std::condition_variable settled_;          // signalled when a guest cluster leaves allocating_
  std::unordered_set<uint64_t> allocating_;  // guest clusters with an allocating write in flight
  std::unique_ptr<Qcow2File> file_;
  Qcow2Header header_;
  std::unique_ptr<Qcow2Metadata> meta_;
  std::unique_ptr<BackingReader> backing_;
  std::string what_;
  void (*hook_)(const char*) = nullptr;
};

}  // namespace tern
