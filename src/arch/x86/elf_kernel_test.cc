#include "arch/x86/elf_kernel.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "arch/x86/elf_fake.h"

namespace tern::x86 {
namespace {

using ::testing::HasSubstr;
using testing::FakeElf;
using testing::FakeSegment;
using testing::kFakeElfPhoff;
using testing::kFakePhdrSize;
using testing::make_fake_elf;
using testing::poke_elf;

std::string error_of(const std::vector<uint8_t>& f) {
  auto k = parse_elf_kernel(f);
  EXPECT_FALSE(k.has_value());
  return k ? std::string() : k.error().message();
}

TEST(ElfKernel, ParsesSegmentsSortedAndPvhNote) {
  FakeElf e;
  e.segments = {{0x2000000, 0x100, 0x2000}, {0x1000000, 0x3000, 0x5000}};
  auto f = make_fake_elf(e);
  ASSERT_TRUE(looks_like_elf(f));
  auto k = parse_elf_kernel(f);
  ASSERT_TRUE(k) << k.error().message();
  EXPECT_EQ(k->entry, 0x1000000u);
  ASSERT_TRUE(k->pvh_entry);
  EXPECT_EQ(*k->pvh_entry, 0x1000100u);
  ASSERT_EQ(k->segments.size(), 2u);
  EXPECT_EQ(k->segments[0].paddr, 0x1000000u);
  EXPECT_EQ(k->segments[0].filesz, 0x3000u);
  EXPECT_EQ(k->segments[0].memsz, 0x5000u);
  EXPECT_EQ(k->segments[1].paddr, 0x2000000u);
  EXPECT_EQ(k->paddr_begin, 0x1000000u);
  EXPECT_EQ(k->paddr_end, 0x2002000u);
  // The file bytes the segment describes are the ones make_fake_elf wrote for segment 1.
  EXPECT_EQ(f[k->segments[0].file_offset + 7], testing::fake_segment_byte(1, 7));
}

TEST(ElfKernel, EightBytePvhNote) {
  FakeElf e;
  e.pvh_desc_size = 8;
  auto k = parse_elf_kernel(make_fake_elf(e));
  ASSERT_TRUE(k) << k.error().message();
  EXPECT_EQ(k->pvh_entry, 0x1000100u);
}

TEST(ElfKernel, NoPvhNoteIsNotAnError) {
  FakeElf e;
  e.pvh_entry.reset();
  auto k = parse_elf_kernel(make_fake_elf(e));
  ASSERT_TRUE(k) << k.error().message();
  EXPECT_FALSE(k->pvh_entry);
}

TEST(ElfKernel, RejectsBadPvhNotes) {
  FakeElf e;
  e.pvh_desc_size = 2;
  EXPECT_THAT(error_of(make_fake_elf(e)), HasSubstr("descriptor is 2 bytes"));
  e.pvh_desc_size = 8;
  e.pvh_entry = 0x100000000ull;
  EXPECT_THAT(error_of(make_fake_elf(e)), HasSubstr("not a 32-bit address"));
}

TEST(ElfKernel, RejectsBadHeaders) {
  EXPECT_FALSE(looks_like_elf(std::vector<uint8_t>{0x7f, 'E', 'L'}));
  EXPECT_THAT(error_of({0x7f, 'E', 'L', 'F', 2, 1, 1}), HasSubstr("shorter than the 64-byte"));
  auto f = make_fake_elf();
  auto g = f;
  g[4] = 1;
  EXPECT_THAT(error_of(g), HasSubstr("not a 64-bit ELF"));
  g = f;
  g[5] = 2;
  EXPECT_THAT(error_of(g), HasSubstr("little-endian"));
  g = f;
  poke_elf<uint16_t>(g, 16, 3);  // ET_DYN
  EXPECT_THAT(error_of(g), HasSubstr("not ET_EXEC"));
  g = f;
  poke_elf<uint16_t>(g, 18, 3);  // EM_386
  EXPECT_THAT(error_of(g), HasSubstr("not x86-64"));
  g = f;
  poke_elf<uint16_t>(g, 54, 32);
  EXPECT_THAT(error_of(g), HasSubstr("e_phentsize 32"));
  g = f;
  poke_elf<uint16_t>(g, 56, 0);
  EXPECT_THAT(error_of(g), HasSubstr("no program headers"));
  g = f;
  poke_elf<uint64_t>(g, 32, ~uint64_t{0} - 8);  // phoff + table overflows
  EXPECT_THAT(error_of(g), HasSubstr("program header table"));
  g = f;
  poke_elf<uint16_t>(g, 56, 1000);
  EXPECT_THAT(error_of(g), HasSubstr("past the end of the file"));
}

TEST(ElfKernel, RejectsBadSegments) {
  const auto f = make_fake_elf();
  const size_t load = kFakeElfPhoff + kFakePhdrSize;  // program header 1: the PT_LOAD
  auto g = f;
  poke_elf<uint64_t>(g, load + 32, f.size());  // filesz: past the end of the file
  EXPECT_THAT(error_of(g), HasSubstr("program header 1: file range past the end of the file"));
  g = f;
  poke_elf<uint64_t>(g, load + 8, ~uint64_t{0});  // offset + filesz overflows
  EXPECT_THAT(error_of(g), HasSubstr("program header 1: file range past the end"));
  g = f;
  poke_elf<uint64_t>(g, load + 40, 0x100);  // memsz < filesz
  EXPECT_THAT(error_of(g), HasSubstr("larger than p_memsz"));
  g = f;
  poke_elf<uint64_t>(g, load + 24, ~uint64_t{0} - 0x100);  // paddr + memsz overflows
  EXPECT_THAT(error_of(g), HasSubstr("overflows"));
  g = f;
  poke_elf<uint32_t>(g, load, 6);  // PT_PHDR: no PT_LOAD left
  EXPECT_THAT(error_of(g), HasSubstr("no PT_LOAD"));

  FakeElf e;
  e.segments = {{0x1000000, 0x100, 0x2000}, {0x1001000, 0x100, 0x100}};
  EXPECT_THAT(error_of(make_fake_elf(e)), HasSubstr("overlap"));
}

TEST(ElfKernel, RejectsMalformedNotes) {
  const auto f = make_fake_elf();
  auto g = f;
  poke_elf<uint64_t>(g, kFakeElfPhoff + 32, 10);  // note segment cut inside the first header
  EXPECT_THAT(error_of(g), HasSubstr("truncated note header"));
  g = f;
  const size_t notes_off = kFakeElfPhoff + 2 * kFakePhdrSize;
  poke_elf<uint32_t>(g, notes_off + 4, 0xfffffff0);  // descsz huge
  EXPECT_THAT(error_of(g), HasSubstr("past the end of the segment"));
  g = f;
  poke_elf<uint32_t>(g, notes_off, 0xffffffff);  // namesz huge (padding must not overflow)
  EXPECT_THAT(error_of(g), HasSubstr("past the end of the segment"));
  g = f;
  poke_elf<uint64_t>(g, kFakeElfPhoff + 32, g.size());  // note segment past the end of the file
  EXPECT_THAT(error_of(g), HasSubstr("program header 0: file range past the end of the file"));
}

TEST(ElfKernel, EveryTruncationIsRefusedNotCrashed) {
  const auto f = make_fake_elf();
  for (size_t n = 0; n < f.size(); n += 7) {
    std::vector<uint8_t> g(f.begin(), f.begin() + static_cast<long>(n));
    EXPECT_FALSE(parse_elf_kernel(g)) << n;
  }
}

}  // namespace
}  // namespace tern::x86
