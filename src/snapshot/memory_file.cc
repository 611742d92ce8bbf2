#include "snapshot/memory_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>

#include "base/checked.h"
#include "base/fd.h"

namespace tern::snap {

namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kPage = 4096;
constexpr uint64_t kMaxRun = 8 * MiB;
constexpr auto kProgressInterval = std::chrono::milliseconds(50);

bool all_zero(const uint8_t* p, size_t n) {
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    uint64_t w[8];
    std::memcpy(w, p + i, sizeof w);
    if ((w[0] | w[1] | w[2] | w[3] | w[4] | w[5] | w[6] | w[7]) != 0) return false;
  }
  for (; i < n; ++i)
    if (p[i] != 0) return false;
  return true;
}

/// Writes the regions of one GuestMemory to an open, already sized file.
class Saver {
 public:
  Saver(const GuestMemory& mem, int fd, const std::string& path, const MemorySaveOptions& o,
        uint64_t total)
      : mem_(mem), fd_(fd), path_(path), o_(o), start_(Clock::now()), last_progress_(start_) {
    res_.total_bytes = total;
    max_run_ = kMaxRun;
    // With a rate limit, write ~50 ms worth at a time so pacing (and progress) stays smooth.
    if (o.rate_limit_bytes_per_s != 0)
      max_run_ = std::clamp(align_down(o.rate_limit_bytes_per_s / 20, kPage), kPage, kMaxRun);
  }

  Result<void> init() {
    if (!o_.direct) return {};
    void* p = ::mmap(nullptr, max_run_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return fail_errno("mmap", "O_DIRECT buffer for " + path_);
    bounce_ = std::unique_ptr<uint8_t, Unmapper>(static_cast<uint8_t*>(p), Unmapper{max_run_});
    return {};
  }

  Result<void> region(const MemoryRegion& r) {
    uint64_t run_gpa = r.gpa, run_len = 0;
    for (uint64_t off = 0; off < r.size;) {
      uint64_t len = std::min(kPage, r.size - off);
      ASSIGN_OR_RETURN(auto page, mem_.slice(r.gpa + off, len));
      if (all_zero(page.data(), page.size())) {
        TRY(flush(run_gpa, run_len));
        res_.zero_bytes += len;
        done_ += len;
        if (done_ - checked_at_ >= MiB) {
          TRY(check_cancel());
          maybe_progress();
        }
      } else {
        if (run_len == 0) run_gpa = r.gpa + off;
        run_len += len;
        if (run_len >= max_run_) TRY(flush(run_gpa, run_len));
      }
      off += len;
    }
    return flush(run_gpa, run_len);
  }

  MemorySaveResult finish() {
    if (o_.progress) o_.progress(done_, res_.total_bytes);
    res_.seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    return res_;
  }

 private:
  /// Writes the pending non-zero run [gpa, gpa+len) at file offset gpa; resets len.
  Result<void> flush(uint64_t gpa, uint64_t& len) {
    if (len == 0) return {};
    ASSIGN_OR_RETURN(auto src, mem_.slice(gpa, len));
    const uint8_t* p = src.data();
    if (bounce_) {
      std::memcpy(bounce_.get(), src.data(), src.size());
      p = bounce_.get();
    }
    for (uint64_t done = 0; done < len;) {
      ssize_t n = retry_eintr([&] {
        return ::pwrite(fd_, p + done, len - done, static_cast<off_t>(gpa + done));
      });
      if (n < 0) return fail_errno("pwrite", path_);
      if (n == 0) return fail_code(EIO, "pwrite", path_ + ": wrote nothing");
      done += static_cast<uint64_t>(n);
    }
    res_.written_bytes += len;
    done_ += len;
    len = 0;
    pace();
    maybe_progress();
    return check_cancel();
  }

  Result<void> check_cancel() const {
    if (o_.cancel && o_.cancel->load()) return fail("save memory file " + path_, "cancelled");
    return {};
  }

  /// Sleeps until the bytes written so far fit the rate limit, or the save is cancelled. Below
  /// 20 pages/s one page is a run and waits page/limit seconds (4096 s at 1 B/s): a cancel
  /// (power-off, SIGTERM) must not wait for that, so the wait is cut into short slices.
  void pace() const {
    if (o_.rate_limit_bytes_per_s == 0) return;
    auto due = std::chrono::duration<double>(static_cast<double>(res_.written_bytes) /
                                             static_cast<double>(o_.rate_limit_bytes_per_s));
    const auto until = start_ + std::chrono::duration_cast<Clock::duration>(due);
    for (auto now = Clock::now(); now < until; now = Clock::now()) {
      if (o_.cancel && o_.cancel->load()) return;
      std::this_thread::sleep_for(std::min<Clock::duration>(until - now, kProgressInterval));
    }
  }

  void maybe_progress() {
    checked_at_ = done_;
    if (!o_.progress || done_ == res_.total_bytes) return;  // the final call comes from finish()
    auto now = Clock::now();
    if (now - last_progress_ < kProgressInterval) return;
    last_progress_ = now;
    o_.progress(done_, res_.total_bytes);
  }

  const GuestMemory& mem_;
  int fd_;
  const std::string& path_;
  const MemorySaveOptions& o_;
  Clock::time_point start_, last_progress_;
  uint64_t max_run_;
  uint64_t done_ = 0, checked_at_ = 0;
  MemorySaveResult res_;
  std::unique_ptr<uint8_t, Unmapper> bounce_;
};

/// End of the highest region (bytes) and the sum of region sizes, or an error on overflow.
Result<std::pair<uint64_t, uint64_t>> extent(std::span<const RegionSpec> specs, const std::string& what) {
  uint64_t end = 0, total = 0;
  for (const auto& s : specs) {
    auto e = checked_add(s.gpa, s.size);
    auto t = checked_add(total, s.size);
    if (!e || !t || *e > static_cast<uint64_t>(INT64_MAX)) return fail(what, "region end overflows");
    end = std::max(end, *e);
    total = *t;
  }
  return std::pair{end, total};
}

}  // namespace

Result<MemorySaveResult> save_memory_file(const GuestMemory& mem, const std::string& path,
                                          const MemorySaveOptions& o) {
  const std::string what = "save memory file " + path;
  std::vector<RegionSpec> specs;
  for (const auto& r : mem.regions()) {
    if (o.direct && (r.gpa % kPage != 0 || r.size % kPage != 0))
      return fail(what, "O_DIRECT needs page-aligned regions");
    specs.push_back({r.gpa, r.size});
  }
  if (specs.empty()) return fail(what, "no guest RAM regions");
  ASSIGN_OR_RETURN(auto ext, extent(specs, what));

  // O_NONBLOCK: a FIFO at `path` fails (ENXIO) instead of blocking; no effect on regular files.
  int flags = O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK | (o.direct ? O_DIRECT : 0);
  int fd_raw = retry_eintr([&] { return ::open(path.c_str(), flags | O_CLOEXEC, 0600); });
  if (fd_raw < 0) {
    if (o.direct && errno == EINVAL)
      return fail_errno("open", path + " with O_DIRECT (not supported by this filesystem)");
    return fail_errno("open", path);
  }
  UniqueFd fd(fd_raw);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return fail_errno("fstat", path);
  // Never truncate-then-unlink something that is not ours to remove, such as /dev/full.
  if (!S_ISREG(st.st_mode)) return fail(what, "not a regular file");

  auto saved = [&]() -> Result<MemorySaveResult> {
    if (::fchmod(fd.get(), 0600) != 0) return fail_errno("fchmod", path);
    if (::ftruncate(fd.get(), static_cast<off_t>(ext.first)) != 0)
      return fail_errno("ftruncate", path + " to " + std::to_string(ext.first) + " bytes");
    Saver s(mem, fd.get(), path, o, ext.second);
    TRY(s.init());
    for (const auto& r : mem.regions()) TRY(s.region(r));
    if (::fsync(fd.get()) != 0) return fail_errno("fsync", path);
    if (::close(fd.release()) != 0) return fail_errno("close", path);
    return s.finish();
  }();
  if (!saved) {
    fd.reset();
    ::unlink(path.c_str());
  }
  return saved;
}

Result<void> check_memory_file(const std::string& path, std::span<const RegionSpec> specs) {
  const std::string what = "memory file " + path;
  ASSIGN_OR_RETURN(auto ext, extent(specs, what));
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return fail_errno("memory file", path);
  if (!S_ISREG(st.st_mode)) return fail(what, "not a regular file");
  if (static_cast<uint64_t>(st.st_size) < ext.first)
    return fail("memory file", path + ": memory file is " + std::to_string(st.st_size) +
                                   " bytes, the snapshot needs " + std::to_string(ext.first));
  return {};
}

}  // namespace tern::snap
