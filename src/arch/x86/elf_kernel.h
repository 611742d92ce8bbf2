// Parsing an uncompressed Linux kernel (vmlinux, ELF64 x86-64) for direct loading: its PT_LOAD
// segments by physical address and its PVH entry point (the XEN_ELFNOTE_PHYS32_ENTRY note, type
// 18, name "Xen", in a PT_NOTE segment: Xen's docs/misc/pvh.pandoc, include/public/elfnote.h).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "base/result.h"

namespace tern::x86 {

/// One PT_LOAD segment: file bytes [file_offset, file_offset + filesz) go to guest-physical
/// [paddr, paddr + filesz); [paddr + filesz, paddr + memsz) is zeroed.
struct ElfSegment {
  uint64_t file_offset = 0;
  uint64_t paddr = 0;
  uint64_t filesz = 0;
  uint64_t memsz = 0;
};

/// A validated vmlinux.
struct ElfKernel {
  uint64_t entry = 0;                 ///< e_entry (a physical address in vmlinux: phys_startup_64).
  std::optional<uint32_t> pvh_entry;  ///< XEN_ELFNOTE_PHYS32_ENTRY (32-bit GPA), if present.
  std::vector<ElfSegment> segments;   ///< PT_LOAD segments with memsz > 0, sorted by paddr.
  uint64_t paddr_begin = 0;           ///< Lowest segment paddr.
  uint64_t paddr_end = 0;             ///< One past the highest paddr + memsz.
};

/// True when `file` starts with the ELF magic (it may still be malformed).
[[nodiscard]] bool looks_like_elf(std::span<const uint8_t> file);

/// Parses and validates an ELF64 little-endian x86-64 executable: header and program-header table
/// inside the file, every PT_LOAD's file range inside the file, filesz <= memsz, no overflow, no
/// overlapping segments, notes well-formed. Errors (op "ELF kernel") say what is wrong, e.g.
/// "program header 3: file range past the end of the file". A missing PVH note is not an error
/// here (pvh_entry stays empty); the loader refuses it.
[[nodiscard]] Result<ElfKernel> parse_elf_kernel(std::span<const uint8_t> file);

}  // namespace tern::x86
