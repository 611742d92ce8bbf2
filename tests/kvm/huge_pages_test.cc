// kvm test: machine-config "huge_pages": "2M" (Firecracker's spelling) boots a tiny PVH kernel on
// 2 MiB hugetlbfs RAM through the real ControlLoop: the host's free 2 MiB pages drop by the
// guest's RAM once the VM is built, GET /vm/config renders "2M", the guest prints on COM1; with
// too few free pages the start is refused naming machine-config.huge_pages before anything is
// built. A few pages are reserved for the test (/proc/sys/vm/nr_hugepages, restored after).
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <iterator>

#include "arch/x86/layout.h"
#include "base/testing/temp_dir.h"
#include "memory/memory_backend.h"
#include "vmm/control_loop.h"
#include "vmm/exit_status.h"
#include "vmm/vm_machine.h"
#include "tests/kvm/tiny_elf.h"

namespace tern::testing {
namespace {

// 32-bit code at the PVH entry: 'H' on COM1, then the ACPI reset register (tern exits with 3).
constexpr uint8_t kCode[] = {0x66, 0xBA, 0xF8, 0x03, 0xB0, 0x48, 0xEE, 0x66, 0xBA,
                             0x06, 0x06, 0xB0, 0x01, 0xEE, 0xF4, 0xEB, 0xFD};
constexpr uint64_t kRamMiB = 16;  // 8 huge pages
constexpr const char* kNrHugepages = "/proc/sys/vm/nr_hugepages";

uint64_t read_u64(const std::string& path) {
  std::ifstream f(path);
  uint64_t v = 0;
  f >> v;
  return v;
}

// Reserves `extra` more 2 MiB pages for the test's lifetime; restores the count after.
class HugePageReservation {
 public:
  explicit HugePageReservation(uint64_t extra) : before_(read_u64(kNrHugepages)) {
    std::ofstream(kNrHugepages) << before_ + extra;
  }
  ~HugePageReservation() { std::ofstream(kNrHugepages) << before_; }

 private:
  uint64_t before_;
};

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

VmResources resources(const TempDir& dir, uint64_t ram_mib) {
  std::string kernel = dir.path() + "/kernel.elf";
  const std::vector<uint8_t> elf = make_pvh_elf(kCode, {.paddr = x86::kHimemStart});
  std::ofstream(kernel, std::ios::binary)
      .write(reinterpret_cast<const char*>(elf.data()), static_cast<std::streamsize>(elf.size()));
  VmResources r;
  BootSource boot;
  boot.kernel_image_path = kernel;
  boot.boot_args = "console=ttyS0";
  r.boot = std::move(boot);
  MachineConfig m;
  m.vcpu_count = 1;
  m.mem_size_mib = ram_mib;
  m.huge_pages = "2M";
  r.set_machine_config(m);
  r.console = "file:" + dir.path() + "/console";
  return r;
}

TEST(HugePagesKvm, TwoMegBootsOnHugetlbfsRam) {
  if (::access("/dev/kvm", R_OK | W_OK) != 0) GTEST_SKIP() << "/dev/kvm not available";
  if (::access(kNrHugepages, W_OK) != 0) GTEST_SKIP() << "cannot reserve huge pages (not root)";
  if (!available_huge_pages_2m()) GTEST_SKIP() << "no 2 MiB huge page pool";
  HugePageReservation reserve(kRamMiB / 2);
  if (available_huge_pages_2m().value_or(0) < kRamMiB / 2)
    GTEST_SKIP() << "the kernel could not reserve " << kRamMiB / 2 << " huge pages";
  TempDir dir("tern-hugepages");
  EventLog events;
  int status = -1;
  {
    auto loop = ControlLoop::create(create_vm_machine_on_any_kvm, events);
    ASSERT_TRUE(loop);
    (*loop)->configure(resources(dir, kRamMiB));
    const uint64_t free_before = available_huge_pages_2m().value_or(0);
    auto started = (*loop)->start();  // built, RAM allocated (every huge page at once)
    ASSERT_TRUE(started) << started.error().error.message();
    EXPECT_EQ(free_before - available_huge_pages_2m().value_or(0), kRamMiB / 2);
    status = (*loop)->run();
  }
  EXPECT_EQ(status, kExitReboot);
  EXPECT_EQ(read_text(dir.path() + "/console"), "H");
}

TEST(HugePagesKvm, TooFewFreePagesAreRefusedNamingTheField) {
  if (::access("/dev/kvm", R_OK | W_OK) != 0) GTEST_SKIP() << "/dev/kvm not available";
  TempDir dir("tern-hugepages");
  EventLog events;
  auto loop = ControlLoop::create(create_vm_machine_on_any_kvm, events);
  ASSERT_TRUE(loop);
  // One page more than are free (and at least 2 GiB more).
  const uint64_t mib = 2 * (available_huge_pages_2m().value_or(0) + 1) + 4096;
  (*loop)->configure(resources(dir, mib));
  auto started = (*loop)->start();
  ASSERT_FALSE(started);
  EXPECT_EQ(started.error().error.message().rfind("machine-config.huge_pages: \"2M\": ", 0), 0u)
      << started.error().error.message();
}

}  // namespace
}  // namespace tern::testing
