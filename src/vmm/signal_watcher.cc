#include "vmm/signal_watcher.h"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>

namespace tern {

Result<std::unique_ptr<SignalWatcher>> SignalWatcher::start(std::function<void(int)> on_signal) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  if (pthread_sigmask(SIG_BLOCK, &set, nullptr) != 0) return fail("pthread_sigmask");
  auto w = std::unique_ptr<SignalWatcher>(new SignalWatcher());
  int fd = ::signalfd(-1, &set, SFD_CLOEXEC);
  if (fd < 0) return fail_errno("signalfd");
  w->sigfd_.reset(fd);
  ASSIGN_OR_RETURN(w->wake_, make_eventfd(0, 0));
  int sfd = w->sigfd_.get();
  int wfd = w->wake_.get();
  w->thread_ = std::thread([sfd, wfd, on_signal = std::move(on_signal)] {
    pthread_setname_np(pthread_self(), "signals");
    pollfd fds[2] = {{sfd, POLLIN, 0}, {wfd, POLLIN, 0}};
    while (true) {
      if (::poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (fds[1].revents != 0) return;
      signalfd_siginfo si{};
      if (::read(sfd, &si, sizeof si) == static_cast<ssize_t>(sizeof si))
        on_signal(static_cast<int>(si.ssi_signo));
    }
  });
  return w;
}

SignalWatcher::~SignalWatcher() {
  uint64_t one = 1;
  if (wake_.valid()) (void)!::write(wake_.get(), &one, sizeof one);
  if (thread_.joinable()) thread_.join();
}

}  // namespace tern
