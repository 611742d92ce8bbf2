#include "arch/x86/pvh.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "arch/x86/boot_params.h"
#include "arch/x86/cmdline.h"
#include "arch/x86/layout.h"
#include "arch/x86/linux_placement.h"
#include "base/checked.h"

namespace tern::x86 {

namespace {

template <class T>
std::span<const uint8_t> bytes_of(const T& v) {
  return {reinterpret_cast<const uint8_t*>(&v), sizeof v};
}

template <class T>
std::span<const uint8_t> bytes_of(const std::vector<T>& v) {
  return {reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(T)};
}

struct Write {
  uint64_t gpa;
  std::span<const uint8_t> bytes;
  std::string what;
};

}  // namespace

HvmStartInfo make_start_info(const PvhBoot& boot) {
  HvmStartInfo si;
  si.cmdline_paddr = boot.cmdline_gpa;
  si.rsdp_paddr = boot.rsdp_gpa;
  if (boot.initrd_size != 0) {
    si.nr_modules = 1;
    si.modlist_paddr = kPvhModlistAddr;
  }
  si.memmap_paddr = kPvhMemmapAddr;
  si.memmap_entries = static_cast<uint32_t>(boot.e820.size());
  return si;
}

Result<PvhBoot> plan_pvh(const ElfKernel& kernel, uint64_t elf_file_size, uint64_t ram_bytes,
                         std::string_view cmdline, uint64_t initrd_size) {
  if (!kernel.pvh_entry) return fail("PVH kernel", "no PVH entry note (XEN_ELFNOTE_PHYS32_ENTRY)");
  if (kernel.segments.empty()) return fail("PVH kernel", "no PT_LOAD segment");
  const uint64_t low_ram_end = std::min(ram_bytes, kHoleStart);
  PvhBoot boot;
  boot.entry = *kernel.pvh_entry;
  boot.kernel_begin = kernel.paddr_begin;
  boot.kernel_end = kernel.paddr_end;
  for (const ElfSegment& s : kernel.segments) {
    const uint64_t end = s.paddr + s.memsz;  // parse_elf_kernel checked it does not overflow
    if (s.paddr < kHimemStart)
      return fail("PVH kernel",
                  fmt::format("segment [{:#x}, {:#x}) is below 1 MiB, where tern keeps the GDT, "
                              "page tables, command line, MP and ACPI tables",
                              s.paddr, end));
    // No --memory can hold a segment that reaches into the 32-bit hole: the kernel is at fault.
    if (end > kHoleStart)
      return fail("PVH kernel",
                  fmt::format("segment [{:#x}, {:#x}) ends above 3 GiB, where the 32-bit PCI "
                              "hole starts (PVH kernels are loaded below it)",
                              s.paddr, end));
    if (end > low_ram_end)
      return fail("guest memory",
                  fmt::format("the kernel's segment [{:#x}, {:#x}) needs {} MiB of RAM below "
                              "3 GiB; the guest has {} MiB there",
                              s.paddr, end, (end + MiB - 1) / MiB, low_ram_end / MiB));
    auto file_end = checked_add(s.file_offset, s.filesz);
    if (!file_end || *file_end > elf_file_size)
      return fail("PVH kernel", fmt::format("segment at {:#x}: file range past the end of the "
                                            "file",
                                            s.paddr));
  }
  bool entry_inside =
      std::any_of(kernel.segments.begin(), kernel.segments.end(), [&](const ElfSegment& s) {
        return boot.entry >= s.paddr && boot.entry < s.paddr + s.filesz;
      });
  if (!entry_inside)
    return fail("PVH kernel",
                fmt::format("PVH entry {:#x} is not inside a loaded segment", boot.entry));
  TRY(validate_cmdline(cmdline, kPvhCmdlineSize));
  if (initrd_size != 0) {
    auto kernel_end = align_up(kernel.paddr_end, 4096);
    TERN_CHECK(kernel_end);  // paddr_end <= low_ram_end
    ASSIGN_OR_RETURN(boot.initrd_gpa,
                     place_initrd(initrd_size, *kernel_end, kPvhInitrdAddrMax, ram_bytes));
    boot.initrd_size = initrd_size;
  }
  boot.start_info_gpa = kPvhStartInfoAddr;
  boot.cmdline_gpa = kCmdlineAddr;
  boot.cmdline_len = cmdline.size();
  boot.rsdp_gpa = kAcpiStart;
  boot.e820 = build_e820(ram_bytes);
  if (boot.e820.size() > kPvhMemmapMaxEntries)
    return fail("PVH kernel",
                fmt::format("memory map of {} entries does not fit", boot.e820.size()));
  return boot;
}

Result<PvhBoot> load_pvh(const GuestMemory& mem, uint64_t ram_bytes, const ElfKernel& kernel,
                         std::span<const uint8_t> elf_file, std::string_view cmdline,
                         std::span<const uint8_t> initrd) {
  // 1. Validate and place everything; nothing is written until all of it has passed.
  ASSIGN_OR_RETURN(PvhBoot boot,
                   plan_pvh(kernel, elf_file.size(), ram_bytes, cmdline, initrd.size()));
  TRY(check_ram_backed(mem, boot.e820, ram_bytes));

  const HvmStartInfo si = make_start_info(boot);
  const HvmModlistEntry module{boot.initrd_gpa, boot.initrd_size, 0, 0};
  std::vector<HvmMemmapTableEntry> memmap;
  for (const auto& e : boot.e820) memmap.push_back({e.addr, e.size, e.type, 0});
  std::vector<uint8_t> cmdline_z(cmdline.begin(), cmdline.end());
  cmdline_z.push_back(0);

  std::vector<Write> writes;
  for (size_t i = 0; i < kernel.segments.size(); ++i) {
    const ElfSegment& s = kernel.segments[i];
    writes.push_back(
        {s.paddr, elf_file.subspan(s.file_offset, s.filesz), fmt::format("kernel segment {}", i)});
  }
  writes.push_back({boot.cmdline_gpa, cmdline_z, "command line"});
  if (!initrd.empty()) {
    writes.push_back({boot.initrd_gpa, initrd, "initrd"});
    writes.push_back({kPvhModlistAddr, bytes_of(module), "PVH module list"});
  }
  writes.push_back({kPvhStartInfoAddr, bytes_of(si), "PVH start_info"});
  writes.push_back({kPvhMemmapAddr, bytes_of(memmap), "PVH memory map"});
  for (const auto& w : writes) {
    if (w.bytes.empty()) continue;
    if (auto sl = mem.slice(w.gpa, w.bytes.size()); !sl)
      return fail("load " + w.what, sl.error().message());
  }
  for (const ElfSegment& s : kernel.segments) {
    if (auto sl = mem.slice(s.paddr, s.memsz); !sl)
      return fail("load kernel", sl.error().message());
  }

  // 2. Write: segments (file bytes, then zeroes up to memsz), then the rest.
  for (const ElfSegment& s : kernel.segments) {
    ASSIGN_OR_RETURN(std::span<uint8_t> dst, mem.slice(s.paddr, s.memsz));
    std::memset(dst.data() + s.filesz, 0, s.memsz - s.filesz);
  }
  for (const auto& w : writes) {
    if (w.bytes.empty()) continue;
    TRY(mem.write(w.gpa, w.bytes));
  }
  return boot;
}

Result<std::span<const uint8_t>> bzimage_compressed_payload(const BzImage& kernel,
                                                            std::span<const uint8_t> file) {
  if (kernel.version < 0x0208)
    return fail("bzImage", fmt::format("boot protocol {} has no payload_offset (needs 2.08)",
                                       boot_protocol_string(kernel.version)));
  constexpr size_t kPayloadOffset = 0x248;
  constexpr size_t kPayloadLength = 0x24C;
  if (kernel.setup_header.size() < kPayloadLength + 4 - kSetupHeaderOffset)
    return fail("bzImage", "setup header too short for payload_offset/payload_length");
  uint32_t off, len;
  std::memcpy(&off, kernel.setup_header.data() + (kPayloadOffset - kSetupHeaderOffset), 4);
  std::memcpy(&len, kernel.setup_header.data() + (kPayloadLength - kSetupHeaderOffset), 4);
  const uint64_t pm_start = (uint64_t{kernel.setup_sects} + 1) * 512;
  const uint64_t begin = pm_start + off;
  if (len == 0) return fail("bzImage", "payload_length is 0 (no compressed kernel recorded)");
  if (begin > file.size() || len > file.size() - begin)
    return fail("bzImage",
                fmt::format("payload_offset {:#x} + payload_length {:#x} past the end of the file",
                            off, len));
  return file.subspan(begin, len);
}

}  // namespace tern::x86
