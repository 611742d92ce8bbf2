#include "snapshot/replace_file.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <utility>

namespace tern::snap {

std::string dir_of(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

Result<void> fsync_dir(const std::string& dir) {
  ASSIGN_OR_RETURN(UniqueFd dfd, open_file(dir, O_RDONLY | O_DIRECTORY));
  if (::fsync(dfd.get()) != 0 && errno != EINVAL) return fail_errno("fsync", dir);
  return {};
}

Result<ReplacementFile> ReplacementFile::create(const std::string& target, bool direct) {
  ReplacementFile f;
  f.target_ = target;
  auto slash = target.rfind('/');
  std::string base = slash == std::string::npos ? target : target.substr(slash + 1);
  std::string dir = slash == std::string::npos ? std::string() : target.substr(0, slash + 1);
  if (base.empty()) return fail("create " + target, "no file name");
  std::string tmpl = dir + "." + base + ".tern-tmp-XXXXXX";
  int fd = ::mkostemp(tmpl.data(), O_CLOEXEC);  // O_EXCL, mode 0600
  if (fd < 0) return fail_errno("create a temporary for", target);
  f.fd_.reset(fd);
  f.tmp_ = tmpl;
  if (direct) {
    int dfd = retry_eintr([&] { return ::open(f.tmp_.c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC); });
    if (dfd < 0) {
      if (errno == EINVAL)
        return fail_errno("open", target + " with O_DIRECT (not supported by this filesystem)");
      return fail_errno("open", f.tmp_ + " with O_DIRECT");
    }
    f.fd_.reset(dfd);
  }
  return f;
}

ReplacementFile::ReplacementFile(ReplacementFile&& o) noexcept
    : fd_(std::move(o.fd_)), target_(std::move(o.target_)), tmp_(std::exchange(o.tmp_, {})) {}

ReplacementFile::~ReplacementFile() {
  fd_.reset();
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
}

Result<void> ReplacementFile::sync_and_close() {
  if (::fsync(fd_.get()) != 0) return fail_errno("fsync", target_ + " (temporary " + tmp_ + ")");
  if (::close(fd_.release()) != 0)
    return fail_errno("close", target_ + " (temporary " + tmp_ + ")");
  return {};
}

Result<void> ReplacementFile::commit() {
  if (::rename(tmp_.c_str(), target_.c_str()) != 0)
    return fail_errno("rename", tmp_ + " to " + target_);
  tmp_.clear();
  return fsync_dir(dir_of(target_));
}

}  // namespace tern::snap
