// kvm tests for reboot in place (--on-reboot, src/vmm/vm.h "Reset rule"): a tiny PVH "kernel"
// that prints one 'B' on COM1 and then asks for a reset (ACPI reset register or the i8042 pulse)
// runs through the real ControlLoop and create_vm_machine with a virtio-blk and an NVMe disk.
// With restart it boots again and again in the same process (one 'B' per boot on the same
// console file, "reset" events counted, the disks' images kept open and locked); with the default
// (a kernel boot: exit) tern ends with status 3 after one boot, as before.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <thread>

#include "api/testing/event_waiter.h"
#include "arch/x86/layout.h"
#include "base/fd.h"
#include "base/testing/temp_dir.h"
#include "block/disk_image.h"
#include "vmm/control_loop.h"
#include "vmm/exit_status.h"
#include "vmm/vm_machine.h"
#include "tests/kvm/tiny_elf.h"

namespace tern::testing {
namespace {

// 32-bit code at the PVH entry:
//   mov dx, 0x3F8; mov al, 'B'; out dx, al      ; one 'B' on COM1 per boot
//   mov dx, 0x606; mov al, 1;   out dx, al      ; ACPI RESET_REG (kAcpiResetPort, kAcpiResetValue)
//   hlt; jmp $-1
constexpr uint8_t kAcpiResetCode[] = {0x66, 0xBA, 0xF8, 0x03, 0xB0, 0x42, 0xEE, 0x66, 0xBA,
                                      0x06, 0x06, 0xB0, 0x01, 0xEE, 0xF4, 0xEB, 0xFD};
//   mov dx, 0x3F8; mov al, 'B'; out dx, al
//   mov al, 0xFE; out 0x64, al                  ; i8042 "pulse reset line"
//   hlt; jmp $-1
constexpr uint8_t kI8042ResetCode[] = {0x66, 0xBA, 0xF8, 0x03, 0xB0, 0x42, 0xEE,
                                       0xB0, 0xFE, 0xE6, 0x64, 0xF4, 0xEB, 0xFD};
//   mov dx, 0x3F8; mov al, 'B'; out dx, al
//   mov dx, 0x606; mov al, 1;   out dx, al      ; ACPI RESET_REG
//   mov dx, 0x3F8; mov al, 'X'; out dx, al      ; must never run: the CPU was reset
//   hlt; jmp $-1
constexpr uint8_t kCodeAfterReset[] = {0x66, 0xBA, 0xF8, 0x03, 0xB0, 0x42, 0xEE, 0x66, 0xBA, 0x06,
                                       0x06, 0xB0, 0x01, 0xEE, 0x66, 0xBA, 0xF8, 0x03, 0xB0, 0x58,
                                       0xEE, 0xF4, 0xEB, 0xFD};
static_assert(x86::kAcpiResetPort == 0x606 && x86::kAcpiResetValue == 1);

bool have_kvm() { return ::access("/dev/kvm", R_OK | W_OK) == 0; }

void write_file(const std::string& path, std::span<const uint8_t> bytes, size_t size = 0) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (size) {
    ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(size)), 0);
  }
}

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

/// A VM of the tiny kernel `code` with a virtio-blk and an NVMe disk, console to a file.
struct RebootVm {
  TempDir dir{"tern-reboot"};
  std::string console = dir.path() + "/console";
  std::string blk = dir.path() + "/blk.img";
  std::string nvme = dir.path() + "/nvme.img";

  VmResources resources(std::span<const uint8_t> code, std::optional<OnReboot> on_reboot) {
    std::string kernel = dir.path() + "/kernel.elf";
    write_file(kernel, make_pvh_elf(code, {.paddr = x86::kHimemStart}));
    write_file(blk, {}, 1 << 20);
    write_file(nvme, {}, 1 << 20);
    VmResources r;
    BootSource boot;
    boot.kernel_image_path = kernel;
    boot.boot_args = "console=ttyS0";
    boot.on_reboot = on_reboot;
    r.boot = std::move(boot);
    r.memory_bytes = 32ull << 20;
    r.console = "file:" + console;
    DiskConfig d;
    d.path = blk;
    r.drives.push_back(drive_for_disk(d, 0));
    d.path = nvme;
    d.interface = DiskInterface::kNvme;
    r.drives.push_back(drive_for_disk(d, 0));
    return r;
  }
};

TEST(RebootInPlace, RestartBootsTheGuestAgainWithTheSameHostResources) {
  if (!have_kvm()) GTEST_SKIP() << "/dev/kvm not available";
  RebootVm vm;
  EventLog events;
  EventWaiter w(events);
  uint64_t resets = 0;
  int status = -1;
  {
    auto loop = ControlLoop::create(create_vm_machine_on_any_kvm, events);
    ASSERT_TRUE(loop);
    (*loop)->configure(vm.resources(kAcpiResetCode, OnReboot::kRestart));
    auto started = (*loop)->start();
    ASSERT_TRUE(started) << started.error().error.message();
    std::thread control([&] { status = (*loop)->run(); });
    auto third = w.wait("reset", 3);
    EXPECT_EQ(third["reason"], "reboot");
    EXPECT_EQ(third["detail"], "KVM_EXIT_IO: ACPI reset register");
    // The disks' images stay open and locked across the resets: another opener is refused.
    DiskConfig again;
    again.path = vm.blk;
    EXPECT_FALSE(DiskImage::open(again)) << "the image lock was dropped by a reset";
    (*loop)->queue().push(cmd::Signal{SIGTERM});
    control.join();
    resets = (*loop)->resets();
  }  // the VM and its console are closed: the file holds every byte
  EXPECT_EQ(status, kExitSignalBase + SIGTERM);
  EXPECT_GE(resets, 3u);
  // One 'B' per boot, on the one console file (not truncated by a reset); the last VM may have
  // been stopped before its 'B'.
  std::string out = read_text(vm.console);
  auto bs = static_cast<uint64_t>(std::count(out.begin(), out.end(), 'B'));
  EXPECT_TRUE(bs == resets || bs == resets + 1) << "console: " << out << ", resets " << resets;
  EXPECT_EQ(out.find_first_not_of('B'), std::string::npos) << out;
}

/// Runs `code` until tern ends by itself; returns its status (-1: it did not start) and the
/// resets it restarted. The VM and its console are closed when this returns.
int run_to_end(RebootVm& vm, std::span<const uint8_t> code, std::optional<OnReboot> on_reboot,
               uint64_t& resets) {
  EventLog events;
  auto loop = ControlLoop::create(create_vm_machine_on_any_kvm, events);
  if (!loop) return -1;
  (*loop)->configure(vm.resources(code, on_reboot));
  auto started = (*loop)->start();
  if (!started) {
    ADD_FAILURE() << started.error().error.message();
    return -1;
  }
  const int status = (*loop)->run();
  resets = (*loop)->resets();
  return status;
}

TEST(RebootInPlace, KernelBootExitsWithStatus3ByDefault) {
  if (!have_kvm()) GTEST_SKIP() << "/dev/kvm not available";
  RebootVm vm;
  uint64_t resets = 0;
  EXPECT_EQ(run_to_end(vm, kI8042ResetCode, std::nullopt, resets), kExitReboot);
  EXPECT_EQ(resets, 0u);
  EXPECT_EQ(read_text(vm.console), "B");
}

TEST(RebootInPlace, NothingRunsAfterTheResetRequest) {
  // The vCPU that wrote the reset register stops at that write (VcpuThread::handle_exit): the
  // next instruction, a console write, never runs. Before, it ran until the control thread's
  // kick arrived ('BX' on the console).
  if (!have_kvm()) GTEST_SKIP() << "/dev/kvm not available";
  RebootVm vm;
  uint64_t resets = 0;
  EXPECT_EQ(run_to_end(vm, kCodeAfterReset, OnReboot::kExit, resets), kExitReboot);
  EXPECT_EQ(read_text(vm.console), "B");
}

TEST(RebootInPlace, I8042ResetRestartsToo) {
  if (!have_kvm()) GTEST_SKIP() << "/dev/kvm not available";
  RebootVm vm;
  EventLog events;
  EventWaiter w(events);
  auto loop = ControlLoop::create(create_vm_machine_on_any_kvm, events);
  ASSERT_TRUE(loop);
  (*loop)->configure(vm.resources(kI8042ResetCode, OnReboot::kRestart));
  ASSERT_TRUE((*loop)->start());
  int status = -1;
  std::thread control([&] { status = (*loop)->run(); });
  EXPECT_EQ(w.wait("reset", 1)["detail"], "KVM_EXIT_IO: i8042 reset command 0xFE");
  (*loop)->queue().push(cmd::Signal{SIGTERM});
  control.join();
  EXPECT_EQ(status, kExitSignalBase + SIGTERM);
}

}  // namespace
}  // namespace tern::testing
