#include "cli/run_command.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>

#include "base/log.h"
#include "base/size.h"
#include "vmm/disk_option.h"
#include "vmm/exit_status.h"
#include "vmm/host_check.h"
#include "stats/stats_table.h"
#include "vmm/control_loop.h"
#include "cli/vmm_runner.h"

namespace tern {

CLI::App* add_run_command(CLI::App& app, RunOptions& o) {
  CLI::App* run = app.add_subcommand("run", "Boot a Linux kernel (bzImage) and run it until it stops");
  run->add_option("--kernel", o.kernel, "Kernel image (bzImage, x86 boot protocol >= 2.12)")
      ->required();
  run->add_option("--initrd", o.initrd, "Initial ramdisk (cpio, optionally compressed)");
  run->add_option("--cmdline", o.cmdline,
                  std::string("Kernel command line; console=ttyS0 is added when it names no "
                              "console (default: \"") + kDefaultCmdline + "\")")
      ->each([&o](const std::string&) { o.cmdline_given = true; });
  run->add_option("--memory", o.memory, "Guest RAM, e.g. 512M, 2G (bare number: MiB)")
      ->capture_default_str();
  run->add_option("--cpus", o.cpus, "Number of vCPUs")->capture_default_str();
  run->add_option("--console", o.console, "Guest serial console: stdio or file:PATH")
      ->capture_default_str();
  run->add_option("--disk", o.disks,
                  "virtio-blk disk (repeatable; the first is /dev/vda): path=FILE[,cache=writeback|"
                  "none|unsafe|directsync][,readonly=on][,serial=STR][,queues=N][,io=io_uring|"
                  "threads]")
      ->take_all()
      ->allow_extra_args(false);
  run->add_option("--api-sock", o.api_sock, "Also serve the control API on this Unix socket");
  run->add_flag("--stats-on-exit", o.stats_on_exit,
                "Print exit, device, KVM and CPU statistics on stderr when the VM stops");
  return run;
}

int run_vm(const RunOptions& o) {
  VmConfig c;
  c.kernel_path = o.kernel;
  if (!o.initrd.empty()) c.initrd_path = o.initrd;
  c.cmdline = o.cmdline_given ? with_default_console(o.cmdline) : kDefaultCmdline;
  auto mem = parse_size(o.memory, "--memory");
  if (!mem) {
    std::fprintf(stderr, "tern: %s\n", mem.error().message().c_str());
    return kExitError;
  }
  c.memory_bytes = *mem;
  c.vcpus = o.cpus;
  c.console = o.console;
  for (const auto& d : o.disks) {
    auto disk = parse_disk_option(d);
    if (!disk) {
      std::fprintf(stderr, "tern: %s\n", disk.error().message().c_str());
      return kExitError;
    }
    c.disks.push_back(std::move(*disk));
  }

  // The control loop validates the input first (a typo gets its own message whatever the host),
  // then checks the host and builds the VM; signals and the API (with --api-sock) feed it.
  EventLog events;
  auto loop = ControlLoop::create(create_vm_machine, events);
  if (!loop) {
    std::fprintf(stderr, "tern: %s\n", loop.error().message().c_str());
    return kExitError;
  }
  BootSource boot{c.kernel_path, c.initrd_path, o.cmdline_given ? std::optional(o.cmdline) : std::nullopt};
  MachineConfig machine;
  machine.vcpu_count = c.vcpus;
  machine.mem_size_mib = c.memory_bytes >> 20;
  (*loop)->configure(c, boot, machine, {});
  int status = run_vmm(**loop, events, o.api_sock, /*start_now=*/true);
  if (o.stats_on_exit) {
    if (const StatsSource* stats = (*loop)->stats())
      std::fputs(render_summary(stats->stats_json()).c_str(), stderr);
  }
  return status;
}

}  // namespace tern
