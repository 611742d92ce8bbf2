#include "vhost_user/backend/seccomp_filter.h"

#include <errno.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>

#include <memory>

namespace tern::vhost_user {

namespace {
struct Release {
  void operator()(void* ctx) const { seccomp_release(static_cast<scmp_filter_ctx>(ctx)); }
};

// Calls needing no argument check: I/O on fds the process holds, the serving loop, threads'
// synchronization, memory management of the allocator, time, and exit.
constexpr int kAllowed[] = {
    // I/O on held fds (image, eventfds, sockets, io_uring, inflight memfd)
    SCMP_SYS(read), SCMP_SYS(write), SCMP_SYS(readv), SCMP_SYS(writev), SCMP_SYS(pread64),
    SCMP_SYS(pwrite64), SCMP_SYS(preadv), SCMP_SYS(pwritev), SCMP_SYS(preadv2),
    SCMP_SYS(pwritev2), SCMP_SYS(fdatasync), SCMP_SYS(fsync), SCMP_SYS(fallocate),
    SCMP_SYS(lseek), SCMP_SYS(close), SCMP_SYS(fstat), SCMP_SYS(newfstatat), SCMP_SYS(fcntl),
    SCMP_SYS(ftruncate),
    // the socket: one front-end at a time
    SCMP_SYS(accept4), SCMP_SYS(accept), SCMP_SYS(recvmsg), SCMP_SYS(sendmsg),
    SCMP_SYS(shutdown), SCMP_SYS(poll), SCMP_SYS(ppoll),
    // queue workers
    SCMP_SYS(epoll_create1), SCMP_SYS(epoll_ctl), SCMP_SYS(epoll_wait), SCMP_SYS(epoll_pwait),
    SCMP_SYS(eventfd2), SCMP_SYS(io_uring_setup), SCMP_SYS(io_uring_enter),
    SCMP_SYS(io_uring_register), SCMP_SYS(memfd_create),
    // memory (mmap / mprotect are further restricted below)
    SCMP_SYS(munmap), SCMP_SYS(madvise), SCMP_SYS(mremap), SCMP_SYS(brk),
    // threads
    SCMP_SYS(futex), SCMP_SYS(set_robust_list), SCMP_SYS(rseq), SCMP_SYS(rt_sigprocmask),
    SCMP_SYS(rt_sigreturn), SCMP_SYS(rt_sigtimedwait), SCMP_SYS(sigaltstack), SCMP_SYS(gettid),
    SCMP_SYS(getpid), SCMP_SYS(tgkill), SCMP_SYS(sched_yield), SCMP_SYS(sched_getaffinity),
    SCMP_SYS(restart_syscall), SCMP_SYS(exit), SCMP_SYS(exit_group),
    // time, randomness
    SCMP_SYS(clock_gettime), SCMP_SYS(clock_nanosleep), SCMP_SYS(nanosleep),
    SCMP_SYS(getrandom),
};
/// One argument comparison (what libseccomp's SCMP_A<n> macros build; spelled out so every field is
/// initialized: clang's -Wmissing-field-initializers rejects the macros' compound literal).
scmp_arg_cmp arg(unsigned index, scmp_compare op, scmp_datum_t a, scmp_datum_t b = 0) {
  scmp_arg_cmp c{};
  c.arg = index;
  c.op = op;
  c.datum_a = a;
  c.datum_b = b;
  return c;
}
}  // namespace

Result<void> install_backend_seccomp(int socket_dir_fd) {
  std::unique_ptr<void, Release> ctx(seccomp_init(SCMP_ACT_ERRNO(EPERM)));
  if (!ctx) return fail("seccomp_init");
  auto* c = static_cast<scmp_filter_ctx>(ctx.get());
  auto check = [](int rc, const char* what) -> Result<void> {
    if (rc != 0) return fail_code(-rc, "seccomp_rule_add", what);
    return {};
  };
  TRY(check(seccomp_attr_set(c, SCMP_FLTATR_CTL_TSYNC, 1), "TSYNC"));
  for (int nr : kAllowed) TRY(check(seccomp_rule_add(c, SCMP_ACT_ALLOW, nr, 0), "allow list"));
  // Mappings never executable: guest RAM and the inflight region are data.
  TRY(check(seccomp_rule_add(c, SCMP_ACT_ALLOW, SCMP_SYS(mmap), 1,
                             arg(2, SCMP_CMP_MASKED_EQ, PROT_EXEC, 0)), "mmap"));
  TRY(check(seccomp_rule_add(c, SCMP_ACT_ALLOW, SCMP_SYS(mprotect), 1,
                             arg(2, SCMP_CMP_MASKED_EQ, PROT_EXEC, 0)), "mprotect"));
  // Threads only (pthread_create); no new processes. clone3's flags are in memory seccomp cannot
  // read: it answers ENOSYS, and glibc falls back to clone.
  TRY(check(seccomp_rule_add(c, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
                             arg(0, SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD)), "clone"));
  TRY(check(seccomp_rule_add(c, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0), "clone3"));
  // Thread names (pthread_setname_np on the calling thread).
  TRY(check(seccomp_rule_add(c, SCMP_ACT_ALLOW, SCMP_SYS(prctl), 1,
                             arg(0, SCMP_CMP_EQ, PR_SET_NAME)), "prctl"));
  // Removing the socket at exit, relative to its directory only.
  if (socket_dir_fd >= 0)
    TRY(check(seccomp_rule_add(c, SCMP_ACT_ALLOW, SCMP_SYS(unlinkat), 1,
                               arg(0, SCMP_CMP_EQ, static_cast<scmp_datum_t>(socket_dir_fd))),
              "unlinkat"));
  if (int rc = seccomp_load(c); rc != 0) return fail_code(-rc, "seccomp_load");
  return {};
}

}  // namespace tern::vhost_user
