#include "cli/run_command.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>

#include "base/log.h"
#include "base/size.h"
#include "cli/vmm_runner.h"
#include "config/boot_source_check.h"
#include "stats/stats_table.h"
#include "vmm/control_loop.h"
#include "vmm/devices/device_surfaces.h"
#include "vmm/disk_option.h"
#include "vmm/exit_status.h"
#include "vmm/host_check.h"
#include "vmm/vm_resources.h"

namespace tern {

CLI::App* add_run_command(CLI::App& app, RunOptions& o) {
  CLI::App* run = app.add_subcommand(
      "run",
      "Boot a Linux kernel (bzImage or vmlinux), or firmware and its disks, until it stops");
  run->add_option("--kernel", o.kernel,
                  "Kernel image: a bzImage (x86 boot protocol >= 2.12) or an uncompressed vmlinux "
                  "(ELF). Required unless --firmware is given");
  run->add_option("--firmware", o.firmware,
                  "Boot firmware instead of a kernel: a BIOS (/usr/share/seabios/bios-256k.bin) or "
                  "a UEFI code volume (/usr/share/OVMF/OVMF_CODE_4M.fd), mapped below 4 GiB and "
                  "run from the reset vector; it boots the disks' own bootloader "
                  "(docs/firmware.md). Cannot be combined with --kernel, --initrd, --cmdline");
  run->add_option("--firmware-vars", o.firmware_vars,
                  "UEFI variable store for a UEFI --firmware (a per-VM copy of "
                  "/usr/share/OVMF/OVMF_VARS_4M.fd); variables the guest sets persist in it");
  run->add_option("--boot-protocol", o.boot_protocol,
                  "How the kernel is entered: pvh (uncompressed at its PVH entry, "
                  "XEN_ELFNOTE_PHYS32_ENTRY; a bzImage's payload is decompressed by tern: gzip, "
                  "xz, zstd, lz4), bzimage (the bzImage's 64-bit entry; the kernel decompresses "
                  "itself) or auto (pvh for an ELF vmlinux, bzimage for a bzImage: host-side "
                  "decompression saved no measurable time and the bzImage path keeps KASLR, "
                  "docs/boot.md; the log says which)")
      ->capture_default_str();
  run->add_option("--on-reboot", o.on_reboot,
                  "What a guest reboot (ACPI reset register, keyboard controller, triple fault) "
                  "does: exit (tern exits with status 3, or 4 for a triple fault; QEMU's "
                  "-no-reboot) or restart (every vCPU and device is reset and the guest boots "
                  "again in this process, with the same disks, console and API socket). Default: "
                  "exit for a kernel boot (as Firecracker), restart for a firmware boot "
                  "(docs/lifecycle.md)");
  run->add_option("--initrd", o.initrd, "Initial ramdisk (cpio, optionally compressed)");
  run->add_option("--cmdline", o.cmdline,
                  std::string("Kernel command line; console=ttyS0 is added when it names no "
                              "console (default: \"") +
                      kDefaultCmdline + "\")")
      ->each([&o](const std::string&) { o.cmdline_given = true; });
  run->add_option("--memory", o.memory, "Guest RAM, e.g. 512M, 2G (bare number: MiB)")
      ->capture_default_str();
  run->add_option("--memory-backend", o.memory_backend,
                  "What backs guest RAM: anon, memfd (another process can map it) or hugetlbfs "
                  "(2 MiB pages, reserved in /proc/sys/vm/nr_hugepages). Default: memfd with a "
                  "vhost-user disk, else anon");
  run->add_option("--cpus", o.cpus, "Number of vCPUs")->capture_default_str();
  run->add_option("--cpu-affinity", o.cpu_affinity, kCpuAffinityHelp);
  run->add_option("--console", o.console, "Guest serial console: stdio or file:PATH")
      ->capture_default_str();
  run->add_option("--disk", o.disks,
                  "virtio-blk disk (repeatable; the first is /dev/vda): path=FILE[,cache=writeback|"
                  "none|unsafe|directsync][,readonly=on][,serial=STR][,queues=N][,queue_size=N]"
                  "[,io=io_uring|threads][,locking=off][,format=raw|qcow2][,backing_files=on]"
                  "[,kick_suppress=on|off][,coalesce_us=N]"
                  "[,poll_us=N] (format: probed when not given, a qcow2 backing file opened only "
                  "with backing_files=on: docs/disk-images.md; the image is locked while open, a second tern on it refused; "
                  "locking=off shares it: docs/disk-images.md; notification tuning, N in "
                  "0..10000 µs, defaults kick_suppress=on, coalesce_us=0, poll_us=0 (off): "
                  "README \"Fewer exits per I/O\"), or "
                  "vhost-user=SOCKET[,queues=N][,queue_size=N]: a disk "
                  "served by a vhost-user-blk back-end listening at SOCKET (qemu-storage-daemon, "
                  "tern vhost-user-blk; docs/vhost-user.md), or path=FILE,interface=nvme[,cache=..]"
                  "[,readonly=on][,serial=STR][,io=..][,locking=off]: an emulated NVMe controller "
                  "(/dev/nvme0n1; "
                  "the guest creates its queues, one per vCPU; docs/nvme.md)")
      ->take_all()
      ->allow_extra_args(false);
  for (const DeviceSurface& s : device_surfaces()) {
    std::string name(s.cli_option);
    run->add_option_function<std::vector<std::string>>(
           name,
           [&o, name](const std::vector<std::string>& v) {
             o.devices[name] = v.empty() ? std::string() : v.back();
           },
           std::string(s.cli_help))
        ->expected(0, 1)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)  // given twice: the last wins
        ->type_name("[=SPEC]");
  }
  for (const KeyedSurface& s : keyed_surfaces()) {
    std::string name(s.cli_option);
    run->add_option_function<std::vector<std::string>>(
           name,
           [&o, name](const std::vector<std::string>& v) {
             auto& list = o.keyed_devices[name];
             list.insert(list.end(), v.begin(), v.end());
           },
           std::string(s.cli_help))
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)  // repeatable, in order
        ->allow_extra_args(false)
        ->type_name("SPEC");
  }
  run->add_option("--api-sock", o.api_sock, "Also serve the control API on this Unix socket");
  run->add_flag("--stats-on-exit", o.stats_on_exit,
                "Print exit, device, KVM and CPU statistics on stderr when the VM stops");
  run->add_flag("--kernel-exits", o.kernel_exits,
                "Count every VM exit in the kernel by hardware reason (eBPF on KVM's tracepoints, "
                "from before the first KVM_RUN; needs CAP_BPF and CAP_PERFMON or root, tracefs, "
                "kernel BTF): GET "
                "/tern/stats \"kernel_exits\", tern stat --kernel-exits, --stats-on-exit. "
                "When it cannot start, one warning says why and the VM runs without it");
  return run;
}

Result<VmResources> run_resources(const RunOptions& o) {
  VmResources r;
  BootSource boot;
  boot.kernel_image_path = o.kernel;
  if (!o.initrd.empty()) boot.initrd_path = o.initrd;
  if (o.cmdline_given) boot.boot_args = o.cmdline;
  auto protocol = parse_boot_protocol(o.boot_protocol);
  if (!protocol)
    return fail("--boot-protocol", "\"" + o.boot_protocol + "\" is not one of auto, pvh, bzimage");
  boot.boot_protocol = *protocol;
  if (!o.firmware.empty()) boot.firmware_path = o.firmware;
  if (!o.firmware_vars.empty()) boot.firmware_vars_path = o.firmware_vars;
  TRY(check_boot_source(boot, cli_boot_source_names()));
  if (!o.on_reboot.empty()) {
    boot.on_reboot = parse_on_reboot(o.on_reboot);
    if (!boot.on_reboot)
      return fail("--on-reboot", "\"" + o.on_reboot + "\" is not one of exit, restart");
  }
  r.boot = std::move(boot);
  ASSIGN_OR_RETURN(r.memory_bytes, parse_size(o.memory, "--memory"));
  r.vcpus = o.cpus;
  r.console = o.console;
  r.kernel_exits = o.kernel_exits;
  size_t virtio_disks = 0;
  size_t nvme_disks = 0;
  for (size_t n = 0; n < o.disks.size(); ++n) {
    auto parsed = parse_disk_option(o.disks[n]);
    if (!parsed) {
      // With several disks, say which one ("--disk #2 poll_us=20000: ...").
      Error e = parsed.error();
      if (o.disks.size() > 1 && e.op.starts_with("--disk"))
        e.op.insert(6, " #" + std::to_string(n + 1));
      return tl::unexpected(std::move(e));
    }
    DiskConfig& disk = *parsed;
    size_t& index = disk.interface == DiskInterface::kNvme ? nvme_disks : virtio_disks;
    r.drives.push_back(drive_for_disk(disk, index++));
  }
  for (const DeviceSurface& s : device_surfaces()) {
    auto given = o.devices.find(s.cli_option);
    if (given == o.devices.end()) continue;
    ASSIGN_OR_RETURN(DeviceSpec d, device_from_cli(s, given->second));
    r.put_device(std::move(d));
  }
  for (const KeyedSurface& s : keyed_surfaces()) {
    auto given = o.keyed_devices.find(s.cli_option);
    if (given == o.keyed_devices.end()) continue;
    for (size_t i = 0; i < given->second.size(); ++i) {
      ASSIGN_OR_RETURN(DeviceSpec d, device_from_cli(s, given->second[i], i));
      r.put_device(std::move(d));
    }
  }
  // Refused here, naming the option, rather than when the VM is built.
  TRY(check_pci_slots(r.drives.size(), r.devices, /*cli=*/true));
  TRY(check_devices_for_vm(r.devices, r.vcpus, /*cli=*/true));
  if (!o.cpu_affinity.empty()) {
    ASSIGN_OR_RETURN(r.cpu_affinity, parse_cpu_affinity(o.cpu_affinity, "--cpu-affinity"));
    ASSIGN_OR_RETURN(CpuList allowed, process_allowed_cpus());
    TRY(check_cpu_affinity(r.cpu_affinity, r.vcpus, allowed, "--cpu-affinity"));
  }
  if (!o.memory_backend.empty()) {
    ASSIGN_OR_RETURN(r.memory_backend, parse_memory_backend(o.memory_backend));
    std::vector<DeviceSpec> disks;
    for (const DriveSpec& d : r.drives) disks.push_back(disk_device_spec(d.disk));
    TRY(choose_memory_backend(r.memory_backend, disks, "--memory-backend"));
  }
  return r;
}

int run_vm(const RunOptions& o) {
  auto r = run_resources(o);
  if (!r) {
    std::fprintf(stderr, "tern: %s\n", r.error().message().c_str());
    return kExitError;
  }

  // The control loop validates the input first (a typo gets its own message whatever the host),
  // then checks the host and builds the VM; signals and the API (with --api-sock) feed it.
  EventLog events;
  auto loop = ControlLoop::create(create_vm_machine, events);
  if (!loop) {
    std::fprintf(stderr, "tern: %s\n", loop.error().message().c_str());
    return kExitError;
  }
  (*loop)->configure(std::move(*r));
  int status = run_vmm(**loop, events, o.api_sock, /*start_now=*/true);
  if (o.stats_on_exit) {
    if (const StatsSource* stats = (*loop)->stats())
      std::fputs(render_summary(stats->stats_json()).c_str(), stderr);
  }
  return status;
}

}  // namespace tern
