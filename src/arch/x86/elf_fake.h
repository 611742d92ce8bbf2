// Synthetic vmlinux ELF files for tests: an ELF64 x86-64 ET_EXEC header, a program-header table
// with PT_LOAD segments of patterned bytes and an optional PT_NOTE with Xen's PHYS32_ENTRY note.
// Header-only; tests poke fields to build broken files (offsets: see make_fake_elf).
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

namespace tern::x86::testing {

struct FakeSegment {
  uint64_t paddr = 0x1000000;  ///< 16 MiB, where Linux's vmlinux loads.
  uint64_t filesz = 0x3000;
  uint64_t memsz = 0x5000;
};

struct FakeElf {
  std::vector<FakeSegment> segments = {FakeSegment{}};
  /// PHYS32_ENTRY value; nullopt: no Xen note (another note is still present).
  std::optional<uint64_t> pvh_entry = 0x1000100;
  uint32_t pvh_desc_size = 4;  ///< 4 or 8 (anything else: malformed).
  uint64_t entry = 0x1000000;  ///< e_entry.
};

inline constexpr size_t kFakeElfPhoff = 64;
inline constexpr size_t kFakePhdrSize = 56;

/// Byte i of segment s's file contents.
inline uint8_t fake_segment_byte(size_t s, size_t i) { return static_cast<uint8_t>(i * 13 + s * 5 + 1); }

template <class T>
void poke_elf(std::vector<uint8_t>& f, size_t off, T v) {
  std::memcpy(f.data() + off, &v, sizeof v);
}

/// Layout: ELF header, phdrs (PT_NOTE first, then the PT_LOADs), the note segment, then each
/// segment's bytes. Program header i is at kFakeElfPhoff + i * 56.
inline std::vector<uint8_t> make_fake_elf(const FakeElf& e = {}) {
  const size_t phnum = 1 + e.segments.size();
  std::vector<uint8_t> f(kFakeElfPhoff + phnum * kFakePhdrSize, 0);
  const uint8_t ident[] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0};
  std::memcpy(f.data(), ident, sizeof ident);
  poke_elf<uint16_t>(f, 16, 2);   // ET_EXEC
  poke_elf<uint16_t>(f, 18, 62);  // EM_X86_64
  poke_elf<uint32_t>(f, 20, 1);
  poke_elf<uint64_t>(f, 24, e.entry);
  poke_elf<uint64_t>(f, 32, kFakeElfPhoff);
  poke_elf<uint16_t>(f, 52, 64);
  poke_elf<uint16_t>(f, 54, kFakePhdrSize);
  poke_elf<uint16_t>(f, 56, static_cast<uint16_t>(phnum));

  // Notes: a "GNU" build-id-like note first (skipped), then Xen's.
  std::vector<uint8_t> notes;
  auto add_note = [&](const char* name, uint32_t namesz, uint32_t type, const void* desc,
                      uint32_t descsz) {
    auto put32 = [&](uint32_t v) {
      for (int i = 0; i < 4; ++i) notes.push_back(static_cast<uint8_t>(v >> (8 * i)));
    };
    put32(namesz);
    put32(descsz);
    put32(type);
    for (uint32_t i = 0; i < namesz; ++i) notes.push_back(static_cast<uint8_t>(name[i]));
    while (notes.size() % 4) notes.push_back(0);
    for (uint32_t i = 0; i < descsz; ++i) notes.push_back(static_cast<const uint8_t*>(desc)[i]);
    while (notes.size() % 4) notes.push_back(0);
  };
  const uint8_t build_id[20] = {1, 2, 3};
  add_note("GNU", 4, 3, build_id, sizeof build_id);
  uint64_t xen_type6 = 0;
  add_note("Xen", 4, 6, &xen_type6, 8);  // XEN_ELFNOTE_LOADER-like: another Xen note, ignored
  if (e.pvh_entry) {
    uint8_t desc[16] = {};
    std::memcpy(desc, &*e.pvh_entry, 8);
    add_note("Xen", 4, 18, desc, e.pvh_desc_size);
  }
  const size_t notes_off = f.size();
  f.insert(f.end(), notes.begin(), notes.end());
  size_t ph = kFakeElfPhoff;
  poke_elf<uint32_t>(f, ph, 4);  // PT_NOTE
  poke_elf<uint64_t>(f, ph + 8, notes_off);
  poke_elf<uint64_t>(f, ph + 32, notes.size());
  poke_elf<uint64_t>(f, ph + 40, notes.size());

  for (size_t s = 0; s < e.segments.size(); ++s) {
    while (f.size() % 16) f.push_back(0);
    const FakeSegment& seg = e.segments[s];
    const size_t off = f.size();
    for (size_t i = 0; i < seg.filesz; ++i) f.push_back(fake_segment_byte(s, i));
    ph = kFakeElfPhoff + (1 + s) * kFakePhdrSize;
    poke_elf<uint32_t>(f, ph, 1);  // PT_LOAD
    poke_elf<uint32_t>(f, ph + 4, 7);
    poke_elf<uint64_t>(f, ph + 8, off);
    poke_elf<uint64_t>(f, ph + 16, seg.paddr + 0xffffffff80000000ull);  // vaddr (unused)
    poke_elf<uint64_t>(f, ph + 24, seg.paddr);
    poke_elf<uint64_t>(f, ph + 32, seg.filesz);
    poke_elf<uint64_t>(f, ph + 40, seg.memsz);
    poke_elf<uint64_t>(f, ph + 48, 0x200000);
  }
  return f;
}

}  // namespace tern::x86::testing
