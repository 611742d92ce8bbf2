#include "vhost_user/backend/seccomp_filter.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include <gtest/gtest.h>

namespace tern::vhost_user {
namespace {

// The filter is installed in a forked child (it cannot be undone); the child reports by exit code.
TEST(SeccompFilterTest, OpenatAndSocketAreDeniedHeldFdsStillWork) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (!install_backend_seccomp(-1)) ::_exit(10);
    errno = 0;
    if (::openat(AT_FDCWD, "/etc/passwd", O_RDONLY) != -1 || errno != EPERM) ::_exit(11);
    if (::socket(AF_UNIX, SOCK_STREAM, 0) != -1 || errno != EPERM) ::_exit(12);
    if (::unlinkat(AT_FDCWD, "/nonexistent", 0) != -1 || errno != EPERM) ::_exit(13);
    char c = 'x';
    if (::write(p[1], &c, 1) != 1 || ::read(p[0], &c, 1) != 1) ::_exit(14);  // held fds work
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  ::close(p[0]);
  ::close(p[1]);
}

}  // namespace
}  // namespace tern::vhost_user
