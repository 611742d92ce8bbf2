#include "vmm/boot_inputs.h"

#include "arch/x86/cmdline.h"
#include "arch/x86/layout.h"
#include "arch/x86/linux_placement.h"
#include "base/checked.h"
#include "base/fd.h"
#include "base/size.h"
#include "vmm/devices/device_registry.h"
#include "vmm/host_check.h"

namespace tern {

namespace {

constexpr size_t kMaxKernelBytes = 512 * MiB;
constexpr size_t kMaxInitrdBytes = 3 * GiB;  // must fit below the 32-bit hole anyway

Result<std::vector<uint8_t>> read_bytes(const std::string& path, size_t limit,
                                        const char* field) {
  auto data = read_file(path, limit);
  if (!data) return fail(field, data.error().message());
  return std::vector<uint8_t>(data->begin(), data->end());
}

}  // namespace

Result<BootInputs> prepare_boot(const VmConfig& c) {
  BootInputs in;
  in.config = c;
  if (c.vcpus == 0 || c.vcpus > kMaxVcpus)
    return fail("--cpus", std::to_string(c.vcpus) + " is out of range (1.." +
                              std::to_string(kMaxVcpus) + ")");
  if (c.memory_bytes % (4 * KiB) != 0)
    return fail("--memory", format_size(c.memory_bytes) + " is not a multiple of 4 KiB");
  uint64_t limit = host_memory_limit();
  if (c.memory_bytes > limit)
    return fail("--memory", format_size(c.memory_bytes) + " is more than this host can back (" +
                                format_size(limit) + " of RAM + swap)");
  ASSIGN_OR_RETURN(MemoryBackend backend,
                   choose_memory_backend(c.memory_backend, c.devices, "--memory-backend"));
  if (backend == MemoryBackend::kHugetlbfs && c.memory_bytes % kHugePageSize != 0)
    return fail("--memory-backend hugetlbfs",
                "--memory " + format_size(c.memory_bytes) + " is not a multiple of 2 MiB");
  auto console = ConsoleTarget::parse(c.console, "--console");
  if (!console) return tl::unexpected(console.error());
  in.console = *console;

  if (c.kernel_path.empty()) return fail("--kernel", "no kernel image given");
  ASSIGN_OR_RETURN(auto kernel_file, read_bytes(c.kernel_path, kMaxKernelBytes, "--kernel"));
  auto bz = x86::parse_bzimage(kernel_file);
  if (!bz) return fail("--kernel", c.kernel_path + ": " + bz.error().message());
  in.kernel = std::move(*bz);

  if (c.initrd_path) {
    ASSIGN_OR_RETURN(in.initrd, read_bytes(*c.initrd_path, kMaxInitrdBytes, "--initrd"));
    if (in.initrd.empty()) return fail("--initrd", *c.initrd_path + ": file is empty");
  }

  if (auto ok = x86::validate_cmdline(c.cmdline, in.kernel.cmdline_size); !ok)
    return fail("--cmdline", ok.error().message());

  auto footprint = x86::kernel_footprint(in.kernel, x86::kHimemStart);
  if (!footprint) return fail("--kernel", footprint.error().message());
  if (auto ok = x86::check_low_ram(*footprint, in.initrd.size(), c.memory_bytes); !ok)
    return fail("--memory", ok.error().message());
  if (!in.initrd.empty()) {
    auto at = x86::place_initrd(in.initrd.size(), footprint->end, in.kernel.initrd_addr_max,
                                c.memory_bytes);
    if (!at) return fail("--initrd", at.error().message());
  }
  ASSIGN_OR_RETURN(in.devices, make_devices(c.devices));
  return in;
}

}  // namespace tern
