// Loading an uncompressed Linux kernel (vmlinux ELF) for the PVH boot protocol: the kernel is
// entered in 32-bit protected mode at its XEN_ELFNOTE_PHYS32_ENTRY with EBX = the guest-physical
// address of an hvm_start_info (Xen docs/misc/pvh.pandoc; structures from Xen's
// include/public/arch-x86/hvm/start_info.h, version 1). Linux implements it with CONFIG_PVH=y
// (arch/x86/platform/pvh/).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "arch/x86/bzimage.h"
#include "arch/x86/e820.h"
#include "arch/x86/elf_kernel.h"
#include "base/result.h"
#include "memory/guest_memory.h"

namespace tern::x86 {

inline constexpr uint32_t kHvmStartMagic = 0x336ec578;  ///< XEN_HVM_START_MAGIC_VALUE.
inline constexpr uint32_t kHvmStartVersion = 1;         ///< Version 1: memmap fields present.

/// struct hvm_start_info (start_info.h): what EBX points to at the PVH entry. All addresses are
/// guest-physical; unused ones are 0.
struct HvmStartInfo {
  uint32_t magic = kHvmStartMagic;
  uint32_t version = kHvmStartVersion;
  uint32_t flags = 0;            ///< SIF_* flags (none set).
  uint32_t nr_modules = 0;       ///< Entries in the module list (1 with an initrd, else 0).
  uint64_t modlist_paddr = 0;    ///< GPA of HvmModlistEntry[nr_modules].
  uint64_t cmdline_paddr = 0;    ///< GPA of the NUL-terminated kernel command line.
  uint64_t rsdp_paddr = 0;       ///< GPA of the ACPI RSDP.
  uint64_t memmap_paddr = 0;     ///< GPA of HvmMemmapTableEntry[memmap_entries] (version >= 1).
  uint32_t memmap_entries = 0;
  uint32_t reserved = 0;
};
static_assert(sizeof(HvmStartInfo) == 56);
static_assert(offsetof(HvmStartInfo, nr_modules) == 12);
static_assert(offsetof(HvmStartInfo, modlist_paddr) == 16);
static_assert(offsetof(HvmStartInfo, cmdline_paddr) == 24);
static_assert(offsetof(HvmStartInfo, rsdp_paddr) == 32);
static_assert(offsetof(HvmStartInfo, memmap_paddr) == 40);
static_assert(offsetof(HvmStartInfo, memmap_entries) == 48);

/// struct hvm_modlist_entry: one module (Linux takes the first as its initrd).
struct HvmModlistEntry {
  uint64_t paddr = 0;
  uint64_t size = 0;           ///< Bytes.
  uint64_t cmdline_paddr = 0;  ///< 0: no module command line.
  uint64_t reserved = 0;
};
static_assert(sizeof(HvmModlistEntry) == 32);
static_assert(offsetof(HvmModlistEntry, cmdline_paddr) == 16);

/// struct hvm_memmap_table_entry: the types are e820's (XEN_HVM_MEMMAP_TYPE_RAM = 1, ...).
struct HvmMemmapTableEntry {
  uint64_t addr = 0;
  uint64_t size = 0;
  uint32_t type = 0;
  uint32_t reserved = 0;
};
static_assert(sizeof(HvmMemmapTableEntry) == 24);
static_assert(offsetof(HvmMemmapTableEntry, type) == 16);

/// Where the PVH structures go: the page boot_params uses on the 64-bit path (layout.h's
/// kZeroPageAddr): start_info, then the module list, then the memory map.
inline constexpr uint64_t kPvhStartInfoAddr = 0x7000;
inline constexpr uint64_t kPvhModlistAddr = kPvhStartInfoAddr + 0x40;
inline constexpr uint64_t kPvhMemmapAddr = kPvhStartInfoAddr + 0x80;
inline constexpr uint64_t kPvhMemmapMaxEntries = (0x1000 - 0x80) / sizeof(HvmMemmapTableEntry);
/// Longest command line for a PVH kernel, without the NUL: x86 Linux's COMMAND_LINE_SIZE (2048)
/// minus the NUL (there is no setup header saying otherwise).
inline constexpr uint32_t kPvhCmdlineSize = 2047;
/// Highest initrd byte for a PVH kernel: x86 Linux's default initrd_addr_max (boot.rst).
inline constexpr uint32_t kPvhInitrdAddrMax = 0x7fffffff;

/// What load_pvh wrote where (GPAs, sizes in bytes).
struct PvhBoot {
  uint32_t entry = 0;           ///< XEN_ELFNOTE_PHYS32_ENTRY: EIP.
  uint64_t start_info_gpa = 0;  ///< kPvhStartInfoAddr: goes in EBX.
  uint64_t kernel_begin = 0;    ///< Lowest PT_LOAD paddr.
  uint64_t kernel_end = 0;      ///< One past the highest PT_LOAD paddr + memsz.
  uint64_t cmdline_gpa = 0;
  uint64_t cmdline_len = 0;     ///< Without the NUL.
  uint64_t initrd_gpa = 0;      ///< 0 when there is no initrd.
  uint64_t initrd_size = 0;
  uint64_t rsdp_gpa = 0;        ///< kAcpiStart: where write_acpi_tables() puts the RSDP.
  std::vector<E820Entry> e820;  ///< The memory map given to the guest (build_e820(ram_bytes)).
};

/// The start_info load_pvh writes for `boot` (exposed for tests).
[[nodiscard]] HvmStartInfo make_start_info(const PvhBoot& boot);

/// Everything load_pvh checks and places without touching guest memory (for prepare_boot, before
/// KVM is touched): same errors, with `elf_file_size` and `initrd_size` in bytes.
[[nodiscard]] Result<PvhBoot> plan_pvh(const ElfKernel& kernel, uint64_t elf_file_size,
                                       uint64_t ram_bytes, std::string_view cmdline,
                                       uint64_t initrd_size);

/// Loads `kernel` (parsed from `elf_file` by parse_elf_kernel) for a guest with `ram_bytes` of RAM
/// laid out as layout.h's ram_regions(): every PT_LOAD's file bytes to its paddr with the rest of
/// memsz zeroed, `cmdline` (+ NUL) at kCmdlineAddr, `initrd` (may be empty) at place_initrd()'s
/// address (as high as possible below min(RAM, 3 GiB) and 2 GiB), the start_info, module list
/// and memory map (build_e820(ram_bytes)) at kPvhStartInfoAddr. rsdp_paddr = kAcpiStart: the
/// caller writes the ACPI tables there (write_acpi_tables). Validated before the first write
/// (op "PVH kernel" unless said otherwise): a PVH entry note present and inside a segment; every
/// segment at or above kHimemStart (clear of tern's GDT, page tables, command line, MP and ACPI
/// tables below 1 MiB), ending at or below kHoleStart (else op "PVH kernel") and inside RAM
/// (else op "guest memory"); the command line (kPvhCmdlineSize);
/// the initrd above the kernel (op "initrd"); every destination backed by `mem`. On error guest
/// memory is untouched. Does not write page tables, GDT, MP or ACPI tables.
[[nodiscard]] Result<PvhBoot> load_pvh(const GuestMemory& mem, uint64_t ram_bytes,
                                       const ElfKernel& kernel, std::span<const uint8_t> elf_file,
                                       std::string_view cmdline, std::span<const uint8_t> initrd);

/// The compressed kernel inside the bzImage `file` (parsed as `kernel`): setup header
/// payload_offset (0x248) and payload_length (0x24C), boot protocol >= 2.08, relative to the
/// protected-mode part at (setup_sects + 1) * 512. A span of `file`. Errors (op "bzImage") when
/// the fields are missing or point outside the file.
[[nodiscard]] Result<std::span<const uint8_t>> bzimage_compressed_payload(
    const BzImage& kernel, std::span<const uint8_t> file);

}  // namespace tern::x86
