#include "base/fd.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/stat.h>

namespace tern {

Result<UniqueFd> open_file(const std::string& path, int flags, int mode) {
  int fd = retry_eintr([&] { return ::open(path.c_str(), flags | O_CLOEXEC, mode); });
  if (fd < 0) return fail_errno("open", path);
  return UniqueFd(fd);
}

Result<std::string> read_file(const std::string& path, size_t limit) {
  // O_NONBLOCK: a FIFO without a writer is refused below instead of waiting for one in open(2).
  ASSIGN_OR_RETURN(UniqueFd fd, open_file(path, O_RDONLY | O_NONBLOCK));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return fail_errno("fstat", path);
  if (!S_ISREG(st.st_mode)) return fail("open", path + ": not a regular file");
  if (static_cast<uint64_t>(st.st_size) > limit)
    return fail("open", path + ": file too large (" + std::to_string(st.st_size) + " bytes)");
  std::string data(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = retry_eintr([&] { return ::read(fd.get(), data.data() + done, data.size() - done); });
    if (n < 0) return fail_errno("read", path);
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  data.resize(done);
  return data;
}

Result<UniqueFd> make_eventfd(unsigned initval, int flags) {
  int fd = ::eventfd(initval, EFD_CLOEXEC | flags);
  if (fd < 0) return fail_errno("eventfd");
  return UniqueFd(fd);
}

}  // namespace tern
