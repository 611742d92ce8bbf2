#include "cli/vhost_user_blk_command.h"

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <thread>

#include "vhost_user/backend/blk_backend.h"
#include "vmm/disk_option.h"
#include "vmm/exit_status.h"

namespace tern {

namespace {
int error(const std::string& what) {
  std::fprintf(stderr, "tern vhost-user-blk: %s\n", what.c_str());
  return kExitError;
}
}  // namespace

CLI::App* add_vhost_user_blk_command(CLI::App& app, VhostUserBlkOptions& o) {
  CLI::App* c = app.add_subcommand(
      "vhost-user-blk", "Serve a disk image to a VMM over vhost-user (tern's own back-end)");
  c->add_option("--socket", o.socket, "Unix socket to listen at (one front-end at a time)")
      ->required();
  c->add_option("--disk", o.disk,
                "path=FILE[,cache=writeback|none|unsafe|directsync][,readonly=on][,serial=ID]"
                "[,queues=N][,queue_size=N][,io=io_uring|threads][,locking=off][,format=raw|qcow2]"
                "[,backing_files=on][,kick_suppress=on|off]"
                "[,coalesce_us=N][,poll_us=N] (locked while served unless locking=off; the "
                "notification tuning as for tern run --disk)")
      ->required();
  c->add_option("--seccomp", o.seccomp, "on: confine the back-end once serving (default); off: debugging")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  return c;
}

int run_vhost_user_blk(const VhostUserBlkOptions& o) {
  if (o.socket.empty()) return error("--socket: a path is required");
  vhost_user::BlkBackendOptions opts;
  opts.socket = o.socket;
  auto disk = parse_disk_option(o.disk);
  if (!disk) return error(disk.error().message());
  if (!disk->vhost_user_socket.empty())
    return error("--disk: vhost-user= is the front-end's option; give path=IMAGE");
  if (disk->interface != DiskInterface::kVirtio)
    return error("--disk interface=nvme: a vhost-user-blk back-end serves virtio-blk (omit it)");
  opts.disk = *disk;
  opts.seccomp = o.seccomp != "off";

  // Signals go to one thread that sets the flags (blocked everywhere else, so the queue threads
  // started later never see EINTR from them).
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  static std::atomic<bool> stop{false};
  std::thread signals([set] {
    for (;;) {
      int sig = 0;
      if (sigwait(&set, &sig) != 0) continue;
      if (sig == SIGUSR1) {
        vhost_user::request_blk_backend_stats();
        continue;
      }
      stop.store(true);
      return;
    }
  });
  signals.detach();  // it ends with the first SIGTERM/SIGINT, or with the process
  auto r = vhost_user::run_blk_backend(opts, stop);
  if (!r) return error(r.error().message());
  return 0;
}

}  // namespace tern
