#include "arch/x86/linux_loader.h"

#include <fmt/format.h>

#include <cstring>

#include "arch/x86/cmdline.h"
#include "arch/x86/layout.h"

namespace tern::x86 {

namespace {

/// End of the real-mode heap, relative to the real-mode code, minus 0x200 (boot.rst heap_end_ptr).
/// Unused by the 64-bit entry path but set as the protocol asks when CAN_USE_HEAP is set.
constexpr uint16_t kHeapEndPtr = 0xFE00;

struct Write {
  uint64_t gpa;
  std::span<const uint8_t> bytes;
  const char* what;
};

}  // namespace

BootParams make_boot_params(const BzImage& kernel, const LinuxBoot& boot) {
  BootParams bp{};
  TERN_CHECK(kernel.setup_header.size() <= kMaxSetupHeaderEnd - kSetupHeaderOffset);
  if (!kernel.setup_header.empty())
    std::memcpy(reinterpret_cast<uint8_t*>(&bp) + kSetupHeaderOffset, kernel.setup_header.data(),
                kernel.setup_header.size());
  SetupHeader& h = bp.hdr;
  h.type_of_loader = kTypeOfLoaderUndefined;
  h.vid_mode = kVidModeNormal;
  h.loadflags = static_cast<uint8_t>(h.loadflags | kLoadedHigh | kCanUseHeap);
  h.heap_end_ptr = kHeapEndPtr;
  h.code32_start = static_cast<uint32_t>(boot.kernel.load_gpa);
  h.cmd_line_ptr = static_cast<uint32_t>(boot.cmdline_gpa);
  bp.ext_cmd_line_ptr = static_cast<uint32_t>(boot.cmdline_gpa >> 32);
  h.ramdisk_image = static_cast<uint32_t>(boot.initrd_gpa);
  bp.ext_ramdisk_image = static_cast<uint32_t>(boot.initrd_gpa >> 32);
  h.ramdisk_size = static_cast<uint32_t>(boot.initrd_size);
  bp.ext_ramdisk_size = static_cast<uint32_t>(boot.initrd_size >> 32);

  TERN_CHECK(boot.e820.size() <= kE820MaxEntriesZeroPage);
  bp.e820_entries = static_cast<uint8_t>(boot.e820.size());
  for (size_t i = 0; i < boot.e820.size(); ++i)
    bp.e820_table[i] = BootE820Entry{boot.e820[i].addr, boot.e820[i].size, boot.e820[i].type};
  return bp;
}

Result<LinuxBoot> load_linux(const GuestMemory& mem, uint64_t ram_bytes, const BzImage& kernel,
                             std::string_view cmdline, std::span<const uint8_t> initrd) {
  // 1. Validate and place everything; nothing is written until all of it has passed.
  TRY(validate_cmdline(cmdline, kernel.cmdline_size));
  LinuxBoot boot;
  ASSIGN_OR_RETURN(boot.kernel, kernel_footprint(kernel, kHimemStart));
  TRY(check_low_ram(boot.kernel, initrd.size(), ram_bytes));
  if (!initrd.empty()) {
    ASSIGN_OR_RETURN(boot.initrd_gpa, place_initrd(initrd.size(), boot.kernel.end,
                                                   kernel.initrd_addr_max, ram_bytes));
    boot.initrd_size = initrd.size();
  }
  boot.entry_rip = kHimemStart + kEntry64Offset;
  boot.boot_params_gpa = kZeroPageAddr;
  boot.cmdline_gpa = kCmdlineAddr;
  boot.cmdline_len = cmdline.size();
  boot.e820 = build_e820(ram_bytes);
  TRY(check_ram_backed(mem, boot.e820, ram_bytes));

  const BootParams bp = make_boot_params(kernel, boot);
  std::vector<uint8_t> cmdline_z(cmdline.begin(), cmdline.end());
  cmdline_z.push_back(0);
  const Write writes[] = {
      {boot.kernel.load_gpa, kernel.payload, "kernel"},
      {boot.cmdline_gpa, cmdline_z, "command line"},
      {boot.initrd_gpa, initrd, "initrd"},
      {boot.boot_params_gpa,
       std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&bp), sizeof bp), "boot_params"},
  };
  for (const auto& w : writes) {
    if (w.bytes.empty()) continue;
    if (auto s = mem.slice(w.gpa, w.bytes.size()); !s)
      return fail("load " + std::string(w.what), s.error().message());
  }

  // 2. Write.
  for (const auto& w : writes) {
    if (w.bytes.empty()) continue;
    TRY(mem.write(w.gpa, w.bytes));
  }
  return boot;
}

}  // namespace tern::x86
