#include "block/image_lock.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace tern {

namespace {

const std::string kOverride(kLockingOffRemedy);

struct flock whole_file(short type) {
  struct flock fl {};
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = 0;
  fl.l_len = 0;  // to the end, however the file grows
  fl.l_pid = 0;  // required for OFD locks
  return fl;
}

// True when another fd of this process is open on the same inode and holds a lock through its
// open file description (/proc/self/fdinfo/N lists it as a "lock:" line).
bool held_in_this_process(int fd) {
  struct stat mine {};
  if (::fstat(fd, &mine) != 0) return false;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return false;
  bool found = false;
  while (struct dirent* e = ::readdir(dir)) {
    char* end = nullptr;
    long other = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || other == fd || other == ::dirfd(dir)) continue;
    struct stat st {};
    if (::fstat(static_cast<int>(other), &st) != 0 || st.st_dev != mine.st_dev ||
        st.st_ino != mine.st_ino)
      continue;
    std::ifstream info("/proc/self/fdinfo/" + std::string(e->d_name));
    for (std::string line; std::getline(info, line);)
      if (line.starts_with("lock:")) found = true;
    if (found) break;
  }
  ::closedir(dir);
  return found;
}

// The refusal for a lock someone else holds: which kind (F_OFD_GETLK tells) and whose.
tl::unexpected<Error> conflict(int fd, bool write, const std::string& field) {
  struct flock probe = whole_file(write ? F_WRLCK : F_RDLCK);
  const char* held = "a lock";
  if (::fcntl(fd, F_OFD_GETLK, &probe) == 0 && probe.l_type != F_UNLCK)
    held = probe.l_type == F_WRLCK ? "a write lock" : "a read lock";
  if (held_in_this_process(fd))
    return fail(field, std::string("in use by another disk of this VM (it holds ") + held +
                           " on it); give each disk its own image, or " + kOverride);
  return fail(field, std::string("in use by another process (") + held +
                         " is held on it); stop that VM, or " + kOverride);
}

}  // namespace

std::string restore_lock_hint(std::string message) {
  if (auto at = message.find(kLockingOffRemedy); at != std::string::npos)
    message.replace(at, kLockingOffRemedy.size(),
                    "restore once the VM that saved the snapshot has ended (tern snapshot --exit)");
  return message;
}

Result<void> lock_image(BorrowedFd fd, bool write, const std::string& field) {
  struct flock fl = whole_file(write ? F_WRLCK : F_RDLCK);
  if (retry_eintr([&] { return ::fcntl(fd.get(), F_OFD_SETLK, &fl); }) == 0) return {};
  int err = errno;
  if (err == EAGAIN || err == EACCES) return conflict(fd.get(), write, field);
  return fail(field, std::string("cannot lock the image (") + std::strerror(err) +
                         "); add locking=off to open it without a lock");
}

}  // namespace tern
