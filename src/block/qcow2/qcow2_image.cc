#include "block/qcow2/qcow2_image.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>

#include "block/image_lock.h"

namespace tern {

namespace {

// A raw backing file: its bytes, zeros past its end.
class RawBacking final : public BackingReader {
 public:
  explicit RawBacking(std::unique_ptr<Qcow2File> f) : f_(std::move(f)) {}
  Result<void> read_at(uint64_t off, uint8_t* buf, uint64_t len) override {
    const uint64_t size = f_->size();
    uint64_t have = off >= size ? 0 : std::min(len, size - off);
    if (have > 0) TRY(f_->read(off, buf, have));
    std::memset(buf + have, 0, len - have);
    return {};
  }

 private:
  std::unique_ptr<Qcow2File> f_;
};

}  // namespace

std::string directory_of(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

Result<std::unique_ptr<Qcow2Image>> Qcow2Image::open(
    std::unique_ptr<Qcow2File> file, const std::string& dir, const Qcow2OpenOptions& o,
    std::vector<std::pair<uint64_t, uint64_t>> chain) {
  std::unique_ptr<Qcow2Image> img(new Qcow2Image());
  img->what_ = o.what;
  ASSIGN_OR_RETURN(img->header_, parse_qcow2_header(*file, o.what, o.writable));
  ASSIGN_OR_RETURN(img->meta_,
                   Qcow2Metadata::open(*file, img->header_, o.what, o.writable, o.sync_metadata));
  if (o.writable && o.block_device) TRY(img->meta_->start_after_counted());
  img->file_ = std::move(file);
  const std::string& name = img->header_.backing_file;
  if (name.empty()) {
    TRY(img->clear_autoclear(o));
    return img;
  }
  if (!o.backing_files)
    return fail("--disk backing_files",
                o.what + " names backing file '" + name +
                    "': not opened without backing_files=on (the name is in bytes a guest may "
                    "have written; add backing_files=on if you made this image)");
  if (chain.size() + 1 >= o.max_chain)
    return fail(o.what, "backing chain longer than " + std::to_string(o.max_chain) + " images");
  std::string path = name[0] == '/' ? name : dir + "/" + name;
  const std::string what = o.what + " backing file " + path;
  // The type is checked before the open (opening a FIFO blocks until a writer comes; a
  // character device's open may act, e.g. a watchdog's) and again on the fd; O_NONBLOCK keeps a
  // FIFO swapped in between from blocking (regular files and block devices ignore it).
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return fail_errno(what);
  if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode))
    return fail(what, "not a regular file or block device");
  int fd = retry_eintr([&] { return ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC); });
  if (fd < 0) return fail_errno(what);
  UniqueFd ufd(fd);
  if (::fstat(ufd.get(), &st) != 0) return fail_errno("fstat", path);
  if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode))
    return fail(what, "not a regular file or block device");
  std::pair<uint64_t, uint64_t> id{st.st_dev, st.st_ino};
  if (std::find(chain.begin(), chain.end(), id) != chain.end())
    return fail(what, "the backing chain loops (this file is already in it)");
  chain.push_back(id);
  if (o.lock_backing) TRY(lock_image(ufd.borrow(), false, what));
  uint64_t size = static_cast<uint64_t>(st.st_size);
  if (S_ISBLK(st.st_mode)) {
    off_t end = ::lseek(ufd.get(), 0, SEEK_END);
    if (end < 0) return fail_errno("lseek", path);
    size = static_cast<uint64_t>(end);
  }
  auto bf = std::make_unique<FdQcow2File>(std::move(ufd), path, size);
  std::string fmt = img->header_.backing_format;
  if (fmt.empty()) fmt = has_qcow2_magic(*bf) ? "qcow2" : "raw";
  if (fmt == "raw") {
    img->backing_ = std::make_unique<RawBacking>(std::move(bf));
  } else {
    Qcow2OpenOptions bo = o;
    bo.what = what;
    bo.writable = false;
    ASSIGN_OR_RETURN(img->backing_, Qcow2Image::open(std::move(bf), directory_of(path), bo, chain));
  }
  TRY(img->clear_autoclear(o));
  return img;
}

Result<void> Qcow2Image::clear_autoclear(const Qcow2OpenOptions& o) {
  // qcow2.txt, autoclear_features: "An implementation may only write to an image with unknown
  // auto-clear features if it clears the respective bits from this field first." tern implements
  // none (bit 0, persistent bitmaps: QEMU would trust dirty bitmaps that miss tern's writes), so
  // a writable open clears them all, durably, before any write.
  if (!o.writable || header_.autoclear_features == 0) return {};
  const uint64_t zero = 0;
  TRY(file_->write(88, &zero, 8));
  if (o.sync_metadata) TRY(file_->sync());
  header_.autoclear_features = 0;
  return {};
}

Result<void> Qcow2Image::map(uint64_t off, uint64_t len, bool write,
                             std::vector<Qcow2Extent>& out) {
  std::lock_guard lock(mu_);
  const uint64_t cs = header_.cluster_size;
  if (off > header_.size || len > header_.size - off)
    return fail(what_, "request past the disk's end");
  while (len > 0) {
    const uint64_t in = off & (cs - 1), n = std::min(cs - in, len);
    ASSIGN_OR_RETURN(Qcow2Mapping m, meta_->lookup(off >> header_.cluster_bits));
    const bool direct = m.kind == Qcow2Mapping::Kind::kData && (!write || m.copied);
    const bool zero = !write && (m.kind == Qcow2Mapping::Kind::kZero ||
                                 (m.kind == Qcow2Mapping::Kind::kUnallocated && !backing_));
    const uint64_t host = direct ? m.host + in : 0;
    if (!out.empty() && out.back().direct == direct && out.back().zero == zero &&
        out.back().guest_off + out.back().len == off &&
        (!direct || out.back().host + out.back().len == host)) {
      out.back().len += n;
    } else {
      out.push_back(Qcow2Extent{off, n, direct, host, zero});
    }
    off += n;
    len -= n;
  }
  return {};
}

Result<void> Qcow2Image::read_compressed(const Qcow2Mapping& m, std::vector<uint8_t>& cluster) {
  const uint64_t cs = header_.cluster_size;
  std::vector<uint8_t> in(m.compressed_bytes);  // at most 2 clusters (the sector count's width)
  TRY(file_->read(m.host, in.data(), in.size()));
  cluster.assign(cs, 0);
  const bool zstd = header_.header_length >= 105 &&
                    (header_.incompatible_features & kQcow2IncompatCompression) != 0;
  if (zstd) {
    ZSTD_DCtx* z = ZSTD_createDCtx();
    if (z == nullptr) return fail(what_, "zstd: out of memory");
    ZSTD_inBuffer ib{in.data(), in.size(), 0};
    ZSTD_outBuffer ob{cluster.data(), cluster.size(), 0};
    size_t r = 1;
    while (ob.pos < ob.size && ib.pos < ib.size) {
      r = ZSTD_decompressStream(z, &ob, &ib);
      if (ZSTD_isError(r)) break;
    }
    ZSTD_freeDCtx(z);
    if (ZSTD_isError(r) || ob.pos != ob.size)
      return fail(what_, "qcow2 metadata: a zstd-compressed cluster does not decompress");
    return {};
  }
  z_stream s{};
  if (inflateInit2(&s, -12) != Z_OK) return fail(what_, "zlib: inflateInit2 failed");
  s.next_in = in.data();
  s.avail_in = static_cast<uInt>(in.size());
  s.next_out = cluster.data();
  s.avail_out = static_cast<uInt>(cs);
  int r = inflate(&s, Z_FINISH);
  const bool ok = (r == Z_STREAM_END || r == Z_BUF_ERROR) && s.avail_out == 0;
  inflateEnd(&s);
  if (!ok) return fail(what_, "qcow2 metadata: a compressed cluster does not decompress");
  return {};
}

Result<void> Qcow2Image::read_cluster_piece(const Qcow2Mapping& m, uint64_t off, uint8_t* buf,
                                            uint64_t len) {
  const uint64_t in = off & (header_.cluster_size - 1);
  switch (m.kind) {
    case Qcow2Mapping::Kind::kData:
      return file_->read(m.host + in, buf, len);
    case Qcow2Mapping::Kind::kZero:
      std::memset(buf, 0, len);
      return {};
    case Qcow2Mapping::Kind::kUnallocated:
      if (backing_) return backing_->read_at(off, buf, len);
      std::memset(buf, 0, len);
      return {};
    case Qcow2Mapping::Kind::kCompressed: {
      std::vector<uint8_t> cluster;
      TRY(read_compressed(m, cluster));
      std::memcpy(buf, cluster.data() + in, len);
      return {};
    }
  }
  return {};
}

Result<void> Qcow2Image::read_sync(uint64_t off, uint8_t* buf, uint64_t len) {
  const uint64_t cs = header_.cluster_size;
  while (len > 0) {
    const uint64_t n = std::min(cs - (off & (cs - 1)), len);
    if (off >= header_.size) {
      std::memset(buf, 0, len);
      return {};
    }
    const uint64_t take = std::min(n, header_.size - off);
    Qcow2Mapping m;
    {
      std::lock_guard lock(mu_);
      ASSIGN_OR_RETURN(m, meta_->lookup(off >> header_.cluster_bits));
    }
    // The bytes outside the mutex: a mapping's host cluster is never freed or moved while the
    // image is open, and an allocation in flight is not in the L2 table yet (the old bytes).
    TRY(read_cluster_piece(m, off, buf, take));
    std::memset(buf + take, 0, n - take);
    off += n;
    buf += n;
    len -= n;
  }
  return {};
}

Result<Qcow2Mapping> Qcow2Image::settled_lookup(std::unique_lock<std::mutex>& lock, uint64_t gc) {
  settled_.wait(lock, [&] { return allocating_.count(gc) == 0; });
  return meta_->lookup(gc);
}

Result<void> Qcow2Image::write_cluster(uint64_t gc, uint64_t in, const uint8_t* buf, uint64_t len) {
  const uint64_t cs = header_.cluster_size;
  std::unique_lock lock(mu_);
  ASSIGN_OR_RETURN(Qcow2Mapping m, settled_lookup(lock, gc));
  if (m.kind == Qcow2Mapping::Kind::kData && m.copied) {
    lock.unlock();  // in place: the cluster is never freed or moved while the image is open
    return file_->write(m.host + in, buf, len);
  }
  if (m.kind == Qcow2Mapping::Kind::kZero && m.copied && m.host != 0) {
    // A zero cluster that kept its host cluster: write it whole, then clear the zero flag.
    std::vector<uint8_t> cluster(cs, 0);
    std::memcpy(cluster.data() + in, buf, len);
    TRY(file_->write(m.host, cluster.data(), cs));
    if (hook_) hook_("data");
    TRY(meta_->set_l2(gc, m.host));
    if (hook_) hook_("l2");
    return {};
  }
  // Allocating write: the new cluster = the old contents (backing, zeros, decompressed, or a
  // shared cluster) with the new bytes over them. A cluster that was never written and whose old
  // contents are zeros gets only the new bytes (the file grown over it first: the rest reads as
  // zeros). The data goes outside the mutex; other writers of this guest cluster wait
  // (allocating_) until its L2 entry names the new cluster, so none allocates it twice.
  bool fresh = false;
  ASSIGN_OR_RETURN(uint64_t host, meta_->allocate_cluster(&fresh));
  const bool zeros_before = m.kind == Qcow2Mapping::Kind::kZero ||
                            (m.kind == Qcow2Mapping::Kind::kUnallocated && !backing_);
  const bool only_new = fresh && zeros_before;
  if (only_new && len < cs) TRY(file_->grow_to(host + cs));
  allocating_.insert(gc);
  lock.unlock();
  if (hook_) hook_("refcount");
  Result<void> ok;
  if (only_new || len == cs) {
    ok = file_->write(host + in, buf, len);  // the data before the L2 entry naming it
  } else {
    std::vector<uint8_t> cluster(cs);
    ok = read_cluster_piece(m, gc << header_.cluster_bits, cluster.data(), cs);
    if (ok) {
      std::memcpy(cluster.data() + in, buf, len);
      ok = file_->write(host, cluster.data(), cs);
    }
  }
  if (ok && hook_) hook_("data");
  lock.lock();
  if (ok) ok = meta_->set_l2(gc, host);  // on an error the cluster stays leaked (refcount 1)
  allocating_.erase(gc);
  settled_.notify_all();
  lock.unlock();
  if (ok && hook_) hook_("l2");
  return ok;
}

Result<void> Qcow2Image::write_sync(uint64_t off, const uint8_t* buf, uint64_t len) {
  const uint64_t cs = header_.cluster_size;
  if (off > header_.size || len > header_.size - off)
    return fail(what_, "write past the disk's end");
  while (len > 0) {
    const uint64_t in = off & (cs - 1), n = std::min(cs - in, len);
    TRY(write_cluster(off >> header_.cluster_bits, in, buf, n));
    off += n;
    buf += n;
    len -= n;
  }
  return {};
}

Result<void> Qcow2Image::write_zeroes(uint64_t off, uint64_t len) {
  const uint64_t cs = header_.cluster_size;
  if (off > header_.size || len > header_.size - off)
    return fail(what_, "zeroing past the disk's end");
  std::vector<uint8_t> zeros;
  while (len > 0) {
    const uint64_t in = off & (cs - 1), n = std::min(cs - in, len);
    const uint64_t gc = off >> header_.cluster_bits;
    std::unique_lock lock(mu_);
    ASSIGN_OR_RETURN(Qcow2Mapping m, settled_lookup(lock, gc));
    const bool reads_zero = m.kind == Qcow2Mapping::Kind::kZero ||
                            (m.kind == Qcow2Mapping::Kind::kUnallocated && !backing_);
    if (!reads_zero && n == cs && header_.version >= 3 &&
        m.kind != Qcow2Mapping::Kind::kCompressed) {
      // A whole cluster on v3: the zero flag, keeping an allocated cluster for later writes
      // (never freed: no stale mapping can reach a reused cluster).
      const bool keep = m.kind == Qcow2Mapping::Kind::kData && m.copied;
      TRY(meta_->set_l2(gc, keep ? m.host : 0, true));
    } else if (!reads_zero) {
      lock.unlock();
      if (zeros.empty()) zeros.assign(cs, 0);
      TRY(write_cluster(gc, in, zeros.data(), n));
    }
    off += n;
    len -= n;
  }
  return {};
}

Result<void> Qcow2Image::flush() {
  return file_->sync();
}

Qcow2Image::~Qcow2Image() {
  // A clean close leaves no leaked clusters: the reserved ones go back to refcount 0 (a failure
  // leaves them leaked, which qemu-img check -r leaks reclaims).
  std::lock_guard lock(mu_);
  if (meta_) (void)meta_->release_reserved();
}

Result<uint64_t> Qcow2Image::host_refcount(uint64_t host) {
  std::lock_guard lock(mu_);
  return meta_->refcount(host);
}

Qcow2Stats Qcow2Image::stats() {
  std::lock_guard lock(mu_);
  const Qcow2Counters& c = meta_->counters();
  return Qcow2Stats{c.l2_hits, c.l2_misses, c.allocations};
}

}  // namespace tern
