#include "firmware/pflash/vars_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "block/image_lock.h"
#include "snapshot/replace_file.h"

namespace tern {

namespace {

/// "firmware-vars: PATH: detail".
tl::unexpected<Error> vars_error(const std::string& path, const std::string& detail,
                                 int errnum = 0) {
  return tl::unexpected<Error>(Error{kVarsField, path + ": " + detail, errnum});
}

Result<void> write_all(int fd, std::span<const uint8_t> data, const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = retry_eintr([&] {
      return ::pwrite(fd, data.data() + done, data.size() - done, static_cast<off_t>(done));
    });
    if (n < 0) return vars_error(path, "write", errno);
    done += static_cast<size_t>(n);
  }
  return {};
}

Result<std::vector<uint8_t>> read_all(int fd, uint64_t size, const std::string& path) {
  std::vector<uint8_t> out(size);
  uint64_t done = 0;
  while (done < size) {
    ssize_t n = retry_eintr(
        [&] { return ::pread(fd, out.data() + done, size - done, static_cast<off_t>(done)); });
    if (n < 0) return vars_error(path, "read", errno);
    if (n == 0) return vars_error(path, "shrank while being read");
    done += static_cast<uint64_t>(n);
  }
  return out;
}

/// `r`'s error (a ReplacementFile step) as a firmware-vars error.
template <class T>
Result<T> in_vars(const std::string& path, Result<T> r) {
  if (!r) return vars_error(path, r.error().message(), r.error().errnum);
  return r;
}

/// The size rules, for the store and for its template.
Result<void> check_size(uint64_t size, const VarsFileSpec& spec, const std::string& what) {
  if (size == 0) return vars_error(what, "is empty");
  if (size % spec.block_size != 0)
    return vars_error(what, "size " + std::to_string(size) + " bytes is not a multiple of the " +
                                std::to_string(spec.block_size) + "-byte flash block");
  if (spec.max_size != 0 && size > spec.max_size)
    return vars_error(what, "size " + std::to_string(size) + " bytes does not fit the " +
                                std::to_string(spec.max_size) + " bytes below the firmware code");
  return {};
}

/// The template's bytes, checked; nullopt-like empty vector when there is no template.
Result<std::vector<uint8_t>> read_template(const VarsFileSpec& spec, bool required) {
  if (spec.template_path.empty()) {
    if (required)
      return vars_error(spec.path,
                        "does not exist, and there is no template (OVMF_VARS) to "
                        "create it from");
    return std::vector<uint8_t>{};
  }
  int raw = retry_eintr([&] { return ::open(spec.template_path.c_str(), O_RDONLY | O_CLOEXEC); });
  if (raw < 0) {
    if (!required && errno == ENOENT) return std::vector<uint8_t>{};
    return vars_error("template " + spec.template_path, "cannot open", errno);
  }
  UniqueFd fd(raw);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return vars_error(spec.template_path, "fstat", errno);
  if (!S_ISREG(st.st_mode))
    return vars_error("template " + spec.template_path, "is not a regular file");
  auto size = static_cast<uint64_t>(st.st_size);
  TRY(check_size(size, spec, "template " + spec.template_path));
  return read_all(fd.get(), size, spec.template_path);
}

/// The lock error without the disk-only remedy.
tl::unexpected<Error> lock_error(Error e) {
  auto at = e.context.find(kLockingOffRemedy);
  if (at != std::string::npos)
    e.context.replace(at, kLockingOffRemedy.size(), "give each VM its own firmware-vars file");
  return tl::unexpected<Error>(std::move(e));
}

}  // namespace

Result<VarsFile> VarsFile::open(const VarsFileSpec& spec) {
  const std::string& path = spec.path;
  if (path.empty()) return fail(kVarsField, "no path given");
  if (spec.block_size == 0) return fail(kVarsField, "block size 0");
  VarsFile f;
  f.path_ = path;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) return vars_error(path, "stat", errno);
    std::string dir = snap::dir_of(path);
    struct stat dst {};
    if (::stat(dir.c_str(), &dst) != 0 || !S_ISDIR(dst.st_mode))
      return vars_error(path, "its directory " + dir + " does not exist");
    if (::access(dir.c_str(), W_OK) != 0)
      return vars_error(path, "cannot be created: its directory " + dir + " is not writable",
                        errno);
    ASSIGN_OR_RETURN(std::vector<uint8_t> tmpl, read_template(spec, true));
    // Mode 0600 (mkostemp's): the variables may hold secrets.
    ASSIGN_OR_RETURN(snap::ReplacementFile rf, in_vars(path, snap::ReplacementFile::create(path)));
    TRY(write_all(rf.fd(), tmpl, path));
    TRY(in_vars(path, rf.sync_and_close()));
    TRY(in_vars(path, rf.commit()));
    f.created_ = true;
  } else if (S_ISDIR(st.st_mode)) {
    return vars_error(path, "is a directory, not a variable store file");
  } else if (!S_ISREG(st.st_mode)) {
    return vars_error(path, "is not a regular file");
  } else if ((st.st_mode & S_IWUSR) == 0) {
    return vars_error(path,
                      "is read-only (its owner has no write permission); tern writes the "
                      "variable store back to it");
  } else if (struct stat ts {}; !spec.template_path.empty() &&
                                ::stat(spec.template_path.c_str(), &ts) == 0 &&
                                ts.st_dev == st.st_dev && ts.st_ino == st.st_ino) {
    return vars_error(path, "is the template " + spec.template_path +
                                " itself; give the VM its own copy (tern creates it from the "
                                "template when the path does not exist)");
  }
  // Stores replace the file the path names in the end: through a symlink, its target (a rename
  // over the link would replace the link and leave the user's file behind).
  f.target_ = path;
  if (!f.created_) {
    char* real = ::realpath(path.c_str(), nullptr);
    if (real == nullptr) return vars_error(path, "realpath", errno);
    f.target_ = real;
    ::free(real);
  }
  int raw = retry_eintr([&] { return ::open(f.target_.c_str(), O_RDWR | O_CLOEXEC); });
  if (raw < 0) {
    int e = errno;
    if (e == EACCES || e == EROFS || e == EPERM)
      return vars_error(path, "is read-only; tern writes the variable store back to it", e);
    return vars_error(path, "open", e);
  }
  f.fd_.reset(raw);
  std::string dir = snap::dir_of(f.target_);
  if (::access(dir.c_str(), W_OK) != 0)
    return vars_error(
        path, "its directory " + dir + " is not writable (tern replaces the file atomically)",
        errno);
  if (auto lk = lock_image(f.fd_.borrow(), true, std::string(kVarsField) + " " + path); !lk)
    return lock_error(lk.error());
  if (::fstat(f.fd_.get(), &st) != 0) return vars_error(path, "fstat", errno);
  auto size = static_cast<uint64_t>(st.st_size);
  TRY(check_size(size, spec, path));
  ASSIGN_OR_RETURN(std::vector<uint8_t> tmpl, read_template(spec, false));
  if (!tmpl.empty() && tmpl.size() != size)
    return vars_error(path, "size " + std::to_string(size) + " bytes differs from the template " +
                                spec.template_path + " (" + std::to_string(tmpl.size()) +
                                " bytes): a store of another firmware build?");
  ASSIGN_OR_RETURN(f.initial_, read_all(f.fd_.get(), size, path));
  return f;
}

Result<void> VarsFile::store(std::span<const uint8_t> contents) {
  if (contents.size() != initial_.size())
    return vars_error(path_, "store of " + std::to_string(contents.size()) + " bytes, expected " +
                                 std::to_string(initial_.size()));
  struct stat st {};
  if (::fstat(fd_.get(), &st) != 0) return vars_error(path_, "fstat", errno);
  ASSIGN_OR_RETURN(snap::ReplacementFile rf, in_vars(path_, snap::ReplacementFile::create(target_)));
  TRY(write_all(rf.fd(), contents, path_));
  if (::fchmod(rf.fd(), st.st_mode & 07777) != 0) return vars_error(path_, "fchmod", errno);
  // Lock the new inode before it takes the path: the store is never reachable unlocked.
  int raw = retry_eintr([&] { return ::open(rf.temp_path().c_str(), O_RDWR | O_CLOEXEC); });
  if (raw < 0) return vars_error(rf.temp_path(), "open", errno);
  UniqueFd next(raw);
  if (auto lk = lock_image(next.borrow(), true, std::string(kVarsField) + " " + path_); !lk)
    return lock_error(lk.error());
  TRY(in_vars(path_, rf.sync_and_close()));
  TRY(in_vars(path_, rf.commit()));
  fd_ = std::move(next);
  return {};
}

void VarsFile::carry_over(std::vector<uint8_t> contents) {
  TERN_CHECK(contents.size() == initial_.size());
  initial_ = std::move(contents);
}

}  // namespace tern
