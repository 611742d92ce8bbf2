#include "block/disk_image.h"

#include "block/image_lock.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

namespace tern {

namespace {

std::string field(const DiskConfig& c) { return "--disk path=" + c.path; }

std::string dir_of(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// Decides the format (DiskConfig::format) and opens a qcow2 image over `meta_fd` (buffered:
// metadata never goes through O_DIRECT). Guest-written bytes choose nothing beyond that: a
// backing file is opened only with backing_files=on.
Result<void> open_format(const DiskConfig& c, const struct stat& st, UniqueFd meta_fd,
                         uint64_t size, DiskFormat* format, std::shared_ptr<Qcow2Image>* out) {
  *format = DiskFormat::kRaw;
  if (c.format == DiskFormat::kRaw) return {};
  auto file = std::make_unique<FdQcow2File>(std::move(meta_fd), c.path, size);
  const bool magic = has_qcow2_magic(*file);
  if (!magic) {
    if (c.format == DiskFormat::kQcow2)
      return fail("--disk format=qcow2", c.path + ": not a qcow2 image (no QFI\\xfb magic)");
    return {};
  }
  Qcow2OpenOptions o;
  o.what = field(c);
  o.writable = !c.read_only;
  o.backing_files = c.backing_files;
  o.sync_metadata = c.cache != CacheMode::kUnsafe;
  o.lock_backing = c.locking;
  o.block_device = S_ISBLK(st.st_mode);
  ASSIGN_OR_RETURN(auto img, Qcow2Image::open(std::move(file), dir_of(c.path), o,
                                              {{static_cast<uint64_t>(st.st_dev),
                                                static_cast<uint64_t>(st.st_ino)}}));
  *out = std::move(img);
  *format = DiskFormat::kQcow2;
  return {};
}

// statx(STATX_DIOALIGN) (Linux 6.1+): {memory alignment, offset alignment}; zeros when unknown.
void probe_dio_align(int fd, uint32_t* mem_align, uint32_t* offset_align) {
  struct statx stx {};
  if (::statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 &&
      (stx.stx_mask & STATX_DIOALIGN) != 0) {
    *mem_align = stx.stx_dio_mem_align;
    *offset_align = stx.stx_dio_offset_align;
  }
}

}  // namespace

Result<DiskImage> DiskImage::open(const DiskConfig& c) {
  DiskImage d;
  d.path_ = c.path;
  d.read_only_ = c.read_only;
  d.cache_ = c.cache;
  d.direct_ = c.cache == CacheMode::kNone || c.cache == CacheMode::kDirectSync;

  struct stat st {};
  if (::stat(c.path.c_str(), &st) != 0) return fail_errno(field(c));
  if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode))
    return fail(field(c), "not a regular file or block device");
  d.block_device_ = S_ISBLK(st.st_mode);

  // Root ignores permission bits; refuse a write-protected image anyway instead of writing to it.
  if (!c.read_only && S_ISREG(st.st_mode) && (st.st_mode & 0222) == 0)
    return fail(field(c), "image is read-only (no write permission bits); add readonly=on");

  int flags = c.read_only ? O_RDONLY : O_RDWR;
  if (c.cache == CacheMode::kDirectSync) flags |= O_DSYNC;
  // Open without O_DIRECT first so permission problems are reported as such.
  int fd = retry_eintr([&] { return ::open(c.path.c_str(), flags | O_CLOEXEC); });
  if (fd < 0) {
    if (!c.read_only && (errno == EACCES || errno == EROFS || errno == EPERM))
      return fail(field(c), std::string("image is read-only (") + std::strerror(errno) +
                                "); add readonly=on to open it read-only");
    return fail_errno(field(c));
  }
  d.fd_.reset(fd);
  UniqueFd meta_fd;  // the buffered fd, kept for probing and qcow2 metadata
  if (d.direct_) {
    int keep = retry_eintr([&] { return ::dup(d.fd_.get()); });
    if (keep < 0) return fail_errno("dup", c.path);
    meta_fd.reset(keep);
    int dfd = retry_eintr([&] { return ::open(c.path.c_str(), flags | O_DIRECT | O_CLOEXEC); });
    if (dfd < 0) {
      if (errno == EINVAL)
        return fail("--disk cache=" + std::string(cache_mode_name(c.cache)),
                    c.path + ": filesystem does not support O_DIRECT (use cache=writeback)");
      return fail_errno(field(c));
    }
    d.fd_.reset(dfd);
  }
  // On the fd kept: the lock lives as long as its open file description.
  if (c.locking) {
    TRY(lock_image(d.fd_.borrow(), !c.read_only, field(c)));
    d.locked_ = true;
  }

  if (d.block_device_) {
    uint64_t bytes = 0;
    if (::ioctl(d.fd_.get(), BLKGETSIZE64, &bytes) != 0) return fail_errno("BLKGETSIZE64", c.path);
    d.size_ = bytes;
  } else {
    if (::fstat(d.fd_.get(), &st) != 0) return fail_errno("fstat", c.path);
    d.size_ = static_cast<uint64_t>(st.st_size);
  }
  if (!meta_fd.valid()) {
    int keep = retry_eintr([&] { return ::dup(d.fd_.get()); });
    if (keep < 0) return fail_errno("dup", c.path);
    meta_fd.reset(keep);
  }
  TRY(open_format(c, st, std::move(meta_fd), d.size_, &d.format_, &d.qcow2_));
  if (d.qcow2_) d.size_ = d.qcow2_->size();
  d.format_probed_ = c.format == DiskFormat::kAuto && d.format_ == DiskFormat::kRaw;

  if (d.direct_) {
    uint32_t mem_align = 0, off_align = 0;
    if (d.block_device_) {
      int ssz = 0;
      if (::ioctl(d.fd_.get(), BLKSSZGET, &ssz) == 0 && ssz > 0) off_align = static_cast<uint32_t>(ssz);
    }
    probe_dio_align(d.fd_.get(), &mem_align, &off_align);
    if (off_align == 0) off_align = 512;
    if (mem_align == 0) mem_align = off_align;
    if ((off_align & (off_align - 1)) != 0 || off_align > 64 * 1024)
      return fail(field(c), "unsupported logical block size " + std::to_string(off_align));
    d.lbs_ = off_align < 512 ? 512 : off_align;
    d.mem_align_ = mem_align;
  }
  return d;
}

void DiskImage::append_counters(std::vector<std::pair<std::string, uint64_t>>& out) const {
  if (!qcow2_) return;
  Qcow2Stats s = qcow2_->stats();
  out.insert(out.end(), {{"qcow2_l2_cache_hits", s.l2_hits},
                         {"qcow2_l2_cache_misses", s.l2_misses},
                         {"qcow2_allocations", s.allocations}});
}

Result<void> DiskImage::flush() const {
  if (read_only_) return {};
  if (retry_eintr([&] { return ::fdatasync(fd_.get()); }) != 0)
    return fail_errno("fdatasync", path_);
  return {};
}

}  // namespace tern
