#include "arch/x86/elf_kernel.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "base/checked.h"

namespace tern::x86 {

namespace {

// ELF-64 Object File Format (System V gABI, "ELF Header", "Program Header", "Note Section").
constexpr uint8_t kElfMagic[4] = {0x7f, 'E', 'L', 'F'};
constexpr uint8_t kElfClass64 = 2;
constexpr uint8_t kElfData2Lsb = 1;
constexpr uint8_t kEvCurrent = 1;
constexpr uint16_t kEtExec = 2;
constexpr uint16_t kEmX86_64 = 62;
constexpr size_t kEhdrSize = 64;
constexpr size_t kPhdrSize = 56;
constexpr uint32_t kPtLoad = 1;
constexpr uint32_t kPtNote = 4;
constexpr uint16_t kPnXnum = 0xffff;  ///< e_phnum escape to section 0's sh_info: not supported.
// Xen's include/public/elfnote.h.
constexpr uint32_t kXenElfnotePhys32Entry = 18;

template <class T>
T load(std::span<const uint8_t> b, size_t off) {
  T v;
  std::memcpy(&v, b.data() + off, sizeof v);
  return v;
}

Result<ElfKernel> bad(std::string what) { return fail("ELF kernel", std::move(what)); }

/// Walks the notes in `notes` (one PT_NOTE segment's bytes) for Xen's PHYS32_ENTRY.
Result<void> walk_notes(std::span<const uint8_t> notes, size_t phdr_index, ElfKernel& k) {
  size_t off = 0;
  while (off < notes.size()) {
    auto where = [&] { return fmt::format("program header {}: note at offset {:#x}", phdr_index, off); };
    if (notes.size() - off < 12) return fail("ELF kernel", where() + ": truncated note header");
    uint64_t namesz = load<uint32_t>(notes, off);
    uint64_t descsz = load<uint32_t>(notes, off + 4);
    uint32_t type = load<uint32_t>(notes, off + 8);
    // Both name and descriptor are padded to 4 bytes; no overflow: each is < 2^32 + 3.
    uint64_t name_padded = (namesz + 3) & ~uint64_t{3};
    uint64_t desc_padded = (descsz + 3) & ~uint64_t{3};
    uint64_t rest = notes.size() - off - 12;
    if (name_padded > rest || desc_padded > rest - name_padded)
      return fail("ELF kernel", where() + ": name or descriptor past the end of the segment");
    std::span<const uint8_t> name = notes.subspan(off + 12, namesz);
    std::span<const uint8_t> desc = notes.subspan(off + 12 + name_padded, descsz);
    // The name "Xen" with its NUL (namesz 4).
    bool xen = namesz == 4 && std::memcmp(name.data(), "Xen", 4) == 0;
    if (xen && type == kXenElfnotePhys32Entry) {
      uint64_t entry;
      if (descsz == 4) {
        entry = load<uint32_t>(desc, 0);
      } else if (descsz == 8) {
        entry = load<uint64_t>(desc, 0);
      } else {
        return fail("ELF kernel", where() + fmt::format(": XEN_ELFNOTE_PHYS32_ENTRY descriptor "
                                                        "is {} bytes (expected 4 or 8)",
                                                        descsz));
      }
      if (entry > UINT32_MAX)
        return fail("ELF kernel", where() + fmt::format(": XEN_ELFNOTE_PHYS32_ENTRY {:#x} is not "
                                                        "a 32-bit address",
                                                        entry));
      if (k.pvh_entry && *k.pvh_entry != entry)
        return fail("ELF kernel", where() + ": two different XEN_ELFNOTE_PHYS32_ENTRY notes");
      k.pvh_entry = static_cast<uint32_t>(entry);
    }
    off += 12 + name_padded + desc_padded;
  }
  return {};
}

}  // namespace

bool looks_like_elf(std::span<const uint8_t> file) {
  return file.size() >= 4 && std::memcmp(file.data(), kElfMagic, 4) == 0;
}

Result<ElfKernel> parse_elf_kernel(std::span<const uint8_t> file) {
  if (!looks_like_elf(file)) return bad("not an ELF file: missing \\x7fELF magic");
  if (file.size() < kEhdrSize)
    return bad(fmt::format("file is {} bytes, shorter than the 64-byte ELF header", file.size()));
  if (file[4] != kElfClass64) return bad("not a 64-bit ELF file (EI_CLASS is not ELFCLASS64)");
  if (file[5] != kElfData2Lsb) return bad("not a little-endian ELF file (EI_DATA)");
  if (file[6] != kEvCurrent) return bad("unknown ELF version (EI_VERSION)");
  uint16_t type = load<uint16_t>(file, 16);
  if (type != kEtExec) return bad(fmt::format("e_type {} is not ET_EXEC (an executable)", type));
  uint16_t machine = load<uint16_t>(file, 18);
  if (machine != kEmX86_64) return bad(fmt::format("e_machine {} is not x86-64", machine));
  ElfKernel k;
  k.entry = load<uint64_t>(file, 24);
  uint64_t phoff = load<uint64_t>(file, 32);
  uint16_t phentsize = load<uint16_t>(file, 54);
  uint16_t phnum = load<uint16_t>(file, 56);
  if (phnum == 0) return bad("no program headers");
  if (phnum == kPnXnum) return bad("extended program header count (PN_XNUM) is not supported");
  if (phentsize != kPhdrSize)
    return bad(fmt::format("e_phentsize {} is not {}", phentsize, kPhdrSize));
  auto table_end = checked_add(phoff, uint64_t{phnum} * kPhdrSize);
  if (!table_end || *table_end > file.size())
    return bad(fmt::format("program header table ({} entries at {:#x}) past the end of the file",
                           phnum, phoff));

  for (size_t i = 0; i < phnum; ++i) {
    size_t at = phoff + i * kPhdrSize;
    uint32_t p_type = load<uint32_t>(file, at);
    if (p_type != kPtLoad && p_type != kPtNote) continue;
    ElfSegment s;
    s.file_offset = load<uint64_t>(file, at + 8);
    s.paddr = load<uint64_t>(file, at + 24);
    s.filesz = load<uint64_t>(file, at + 32);
    s.memsz = load<uint64_t>(file, at + 40);
    auto file_end = checked_add(s.file_offset, s.filesz);
    if (!file_end || *file_end > file.size())
      return bad(fmt::format("program header {}: file range past the end of the file", i));
    if (p_type == kPtNote) {
      TRY(walk_notes(file.subspan(s.file_offset, s.filesz), i, k));
      continue;
    }
    if (s.filesz > s.memsz)
      return bad(fmt::format("program header {}: p_filesz {:#x} is larger than p_memsz {:#x}", i,
                             s.filesz, s.memsz));
    if (!checked_add(s.paddr, s.memsz))
      return bad(fmt::format("program header {}: p_paddr {:#x} + p_memsz {:#x} overflows", i,
                             s.paddr, s.memsz));
    if (s.memsz == 0) continue;
    k.segments.push_back(s);
  }
  if (k.segments.empty()) return bad("no PT_LOAD segment with a non-zero size");
  std::sort(k.segments.begin(), k.segments.end(),
            [](const ElfSegment& a, const ElfSegment& b) { return a.paddr < b.paddr; });
  for (size_t i = 1; i < k.segments.size(); ++i) {
    const ElfSegment& p = k.segments[i - 1];
    const ElfSegment& s = k.segments[i];
    if (p.paddr + p.memsz > s.paddr)
      return bad(fmt::format("PT_LOAD segments [{:#x}, {:#x}) and [{:#x}, {:#x}) overlap", p.paddr,
                             p.paddr + p.memsz, s.paddr, s.paddr + s.memsz));
  }
  k.paddr_begin = k.segments.front().paddr;
  k.paddr_end = 0;
  for (const ElfSegment& s : k.segments) k.paddr_end = std::max(k.paddr_end, s.paddr + s.memsz);
  return k;
}

}  // namespace tern::x86
