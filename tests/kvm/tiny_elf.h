// make_pvh_elf: a tiny ELF64 x86-64 "kernel" built in memory for kvm tests — one PT_LOAD of a few
// bytes of 32-bit code and, optionally, the XEN_ELFNOTE_PHYS32_ENTRY note that makes it a PVH
// kernel (Xen docs/misc/pvh.pandoc), as tern's loaders (parse_elf_kernel, prepare_boot) read it.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace tern::testing {

/// Where the segment goes and where it is entered.
struct PvhElfLayout {
  uint64_t paddr = 0x100000;   ///< The PT_LOAD's paddr (and e_entry: a HLT).
  uint64_t memsz = 0x2000;     ///< memsz > filesz: the rest is zeroed by the loader.
  uint64_t entry_offset = 0x10;  ///< PVH entry = paddr + entry_offset.
  bool with_pvh_note = true;
};

/// An ELF64 x86-64 executable: ELF header, PT_LOAD (+ PT_NOTE with the PVH entry note when
/// `l.with_pvh_note`), the note, then the segment's bytes at file offset 0x100: entry_offset
/// HLTs (e_entry points there) followed by `code` (the PVH entry).
inline std::vector<uint8_t> make_pvh_elf(std::span<const uint8_t> code, const PvhElfLayout& l) {
  constexpr size_t kPhoff = 64, kPhentsize = 56, kNoteOff = 0xb0, kSegOff = 0x100;
  auto put = [](std::vector<uint8_t>& out, size_t offset, auto v) {
    std::memcpy(out.data() + offset, &v, sizeof(v));
  };
  const uint16_t phnum = l.with_pvh_note ? 2 : 1;
  std::vector<uint8_t> seg(l.entry_offset + code.size(), 0xF4);
  std::memcpy(seg.data() + l.entry_offset, code.data(), code.size());
  std::vector<uint8_t> f(kSegOff + seg.size(), 0);
  const uint8_t ident[] = {0x7f, 'E', 'L', 'F', 2 /*ELFCLASS64*/, 1 /*LSB*/, 1 /*EV_CURRENT*/};
  std::memcpy(f.data(), ident, sizeof(ident));
  put(f, 16, uint16_t{2});             // e_type ET_EXEC
  put(f, 18, uint16_t{62});            // e_machine EM_X86_64
  put(f, 20, uint32_t{1});             // e_version
  put(f, 24, uint64_t{l.paddr});       // e_entry (the 64-bit entry; not used by PVH)
  put(f, 32, uint64_t{kPhoff});        // e_phoff
  put(f, 52, uint16_t{64});            // e_ehsize
  put(f, 54, uint16_t{kPhentsize});    // e_phentsize
  put(f, 56, phnum);                   // e_phnum
  // PT_LOAD, R+X, vaddr like a kernel's (0xffffffff81000000).
  size_t ph = kPhoff;
  put(f, ph + 0, uint32_t{1});
  put(f, ph + 4, uint32_t{5});
  put(f, ph + 8, uint64_t{kSegOff});
  put(f, ph + 16, uint64_t{0xffffffff81000000ull});
  put(f, ph + 24, uint64_t{l.paddr});
  put(f, ph + 32, uint64_t{seg.size()});
  put(f, ph + 40, uint64_t{l.memsz});
  put(f, ph + 48, uint64_t{0x1000});
  if (l.with_pvh_note) {
    // Elf64_Nhdr{namesz 4, descsz 4, type 18 = XEN_ELFNOTE_PHYS32_ENTRY}, "Xen\0", entry.
    put(f, kNoteOff + 0, uint32_t{4});
    put(f, kNoteOff + 4, uint32_t{4});
    put(f, kNoteOff + 8, uint32_t{18});
    std::memcpy(f.data() + kNoteOff + 12, "Xen", 4);
    put(f, kNoteOff + 16, static_cast<uint32_t>(l.paddr + l.entry_offset));
    ph += kPhentsize;
    put(f, ph + 0, uint32_t{4});  // PT_NOTE
    put(f, ph + 4, uint32_t{4});
    put(f, ph + 8, uint64_t{kNoteOff});
    put(f, ph + 32, uint64_t{20});
    put(f, ph + 40, uint64_t{20});
    put(f, ph + 48, uint64_t{4});
  }
  std::memcpy(f.data() + kSegOff, seg.data(), seg.size());
  return f;
}

}  // namespace tern::testing
