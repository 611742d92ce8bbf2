// DiskImage: an opened raw disk image (regular file or block device) with the properties the
// block device needs: size in bytes, whether O_DIRECT is in use and the alignment it requires.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/fd.h"
#include "base/result.h"
#include "block/disk_config.h"
#include "block/qcow2/qcow2_image.h"

namespace tern {

class DiskImage {
 public:
  /// Opens `config.path` as the cache mode asks (none: O_DIRECT; directsync: O_DIRECT|O_DSYNC;
  /// writeback/unsafe: page cache), O_RDONLY when read_only. Errors name the --disk field:
  /// missing image or no permission -> "--disk path=<p>: ..."; a file that is read-only for us
  /// opened for writing -> "--disk path=<p>: image is read-only (add readonly=on)"; cache=none on
  /// a filesystem without O_DIRECT -> "--disk cache=none: <p>: filesystem does not support
  /// O_DIRECT (use cache=writeback)". With config.locking (the default) the image is locked for
  /// as long as this DiskImage is open: a write lock, or a read lock when read_only (lock_image,
  /// block/image_lock.h); a lock held by another open refuses it: "--disk path=<p>: in use by
  /// another process (a write lock is held on it); stop that VM, or add locking=off to share
  /// it anyway". Probes the logical block size for O_DIRECT (BLKSSZGET for block devices, statx
  /// STATX_DIOALIGN for files, else 512).
  /// Format (config.format): raw serves the bytes as they are; qcow2 requires the magic
  /// ("--disk format=qcow2: <p>: not a qcow2 image"); not given, a file starting with the qcow2
  /// magic is opened as qcow2 and anything else as raw. A qcow2 image is validated at open
  /// (Qcow2Image::open: errors name the header field or feature refused) and its backing file is
  /// opened only with config.backing_files (else refused naming "--disk backing_files").
  [[nodiscard]] static Result<DiskImage> open(const DiskConfig& config);

  [[nodiscard]] BorrowedFd fd() const { return fd_.borrow(); }
  /// The format served: kRaw or kQcow2 (never kAuto).
  [[nodiscard]] DiskFormat format() const { return format_; }
  /// True for a raw disk whose format was probed (no format= given): the block executor then
  /// refuses guest writes that would put the qcow2 magic at offset 0 (as QEMU does).
  [[nodiscard]] bool format_probed() const { return format_probed_; }
  /// The qcow2 image (shared by the disk's queues), or nullptr for a raw disk.
  [[nodiscard]] Qcow2Image* qcow2() const { return qcow2_.get(); }
  /// Appends the qcow2 metadata counters for `tern stat` (qcow2_l2_cache_hits,
  /// qcow2_l2_cache_misses, qcow2_allocations: host clusters allocated); nothing for raw.
  void append_counters(std::vector<std::pair<std::string, uint64_t>>& out) const;
  /// Disk size in bytes: the file's (raw) or the qcow2 virtual size (need not be a multiple of
  /// 512; the tail is never exposed).
  [[nodiscard]] uint64_t size_bytes() const { return size_; }
  /// Capacity reported to the guest, in 512-byte sectors: floor(size / 512).
  [[nodiscard]] uint64_t capacity_sectors() const { return size_ / 512; }
  [[nodiscard]] bool read_only() const { return read_only_; }
  [[nodiscard]] bool block_device() const { return block_device_; }
  [[nodiscard]] bool direct() const { return direct_; }
  /// Logical block size in bytes: the alignment of file offsets and lengths for O_DIRECT
  /// (512 without O_DIRECT).
  [[nodiscard]] uint32_t logical_block_size() const { return lbs_; }
  /// Required alignment of memory buffers for O_DIRECT, in bytes (1 without O_DIRECT).
  [[nodiscard]] uint32_t memory_alignment() const { return mem_align_; }
  [[nodiscard]] CacheMode cache() const { return cache_; }
  /// Whether this open holds an image lock (DiskConfig::locking).
  [[nodiscard]] bool locked() const { return locked_; }
  [[nodiscard]] const std::string& path() const { return path_; }
  /// Makes every completed write durable: fdatasync(2) of a writable image (any cache mode,
  /// `unsafe` included); nothing for a read-only one. Used by snapshots after the device is
  /// quiesced. Errors (EIO, ENOSPC) name the path.
  [[nodiscard]] Result<void> flush() const;

 private:
  DiskImage() = default;
  UniqueFd fd_;
  std::string path_;
  uint64_t size_ = 0;
  bool read_only_ = false;
  bool block_device_ = false;
  bool direct_ = false;
  bool locked_ = false;
  uint32_t lbs_ = 512;
  uint32_t mem_align_ = 1;
  CacheMode cache_ = CacheMode::kWriteback;
  DiskFormat format_ = DiskFormat::kRaw;
  bool format_probed_ = false;
  std::shared_ptr<Qcow2Image> qcow2_;
};

}  // namespace tern
