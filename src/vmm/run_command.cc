#include "vmm/run_command.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>

#include "base/log.h"
#include "base/size.h"
#include "vmm/exit_status.h"
#include "vmm/host_check.h"
#include "vmm/signal_watcher.h"
#include "vmm/vm.h"

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

  // User input first: a typo gets its own message whatever the host.
  auto inputs = prepare_boot(c);
  if (!inputs) {
    std::fprintf(stderr, "tern: %s\n", inputs.error().message().c_str());
    return kExitError;
  }
  if (::access("/dev/kvm", R_OK | W_OK) != 0 || !host_has_hw_virt()) {
    std::fprintf(stderr, "tern: %s\n", no_hw_virt_message().c_str());
    return kExitNoHwVirt;
  }

  // Block the stop signals before any thread exists, so they reach the watcher only.
  std::atomic<int> signo{0};
  Vm* current = nullptr;
  std::mutex current_mu;
  auto watcher = SignalWatcher::start([&](int s) {
    signo = s;
    std::lock_guard lock(current_mu);
    if (current) current->stop(StopEvent{StopKind::kStopped, -1, 0, strsignal(s)});
  });
  if (!watcher) {
    std::fprintf(stderr, "tern: %s\n", watcher.error().message().c_str());
    return kExitError;
  }

  auto vm = Vm::create(*inputs);
  if (!vm) {
    std::fprintf(stderr, "tern: %s\n", vm.error().message().c_str());
    return kExitError;
  }
  {
    std::lock_guard lock(current_mu);
    current = vm->get();
  }
  StopEvent e = (*vm)->run();
  {
    std::lock_guard lock(current_mu);
    current = nullptr;
  }
  if (e.kind == StopKind::kPowerOff) return kExitPowerOff;
  std::string where = e.vcpu >= 0 ? fmt::format(" (vCPU {}, RIP {:#x})", e.vcpu, e.rip) : "";
  std::fprintf(stderr, "tern: guest stopped: %s: %s%s\n", stop_kind_name(e.kind), e.detail.c_str(),
               where.c_str());
  if (e.kind == StopKind::kStopped) return kExitSignalBase + (signo ? signo.load() : 15);
  return exit_status_for(e.kind);
}

}  // namespace tern
