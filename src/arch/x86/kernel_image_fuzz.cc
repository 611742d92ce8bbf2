// libFuzzer target: the front end of direct kernel loading on arbitrary bytes. A bzImage is parsed
// (parse_bzimage) and its payload located by the setup header's payload_offset/payload_length
// (boot.rst, protocol 2.08+); anything else is taken as a payload or ELF itself. The payload is
// decompressed (at most 16 MiB) and the result, or an uncompressed input, parsed as a vmlinux
// (parse_elf_kernel) and placed for PVH (plan_pvh) in RAM sizes at the edges. None of it may
// crash, read outside the input or write outside its buffers, or place the initrd over the kernel.
#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <span>

#include "arch/x86/bzimage.h"
#include "arch/x86/elf_kernel.h"
#include "arch/x86/kernel_payload.h"
#include "arch/x86/layout.h"
#include "arch/x86/pvh.h"

namespace {

constexpr uint64_t kMaxOutputBytes = 16 << 20;

uint32_t load_le32(std::span<const uint8_t> b, size_t off) {
  uint32_t v = 0;
  std::memcpy(&v, b.data() + off, sizeof v);
  return v;
}

/// Parses `elf` as a vmlinux and, if it parses, places it for PVH (plan_pvh) in guest RAM sizes
/// at the edges: what its segments need exactly, between 3 and 4 GiB, above 4 GiB; with and
/// without an initrd. Placement must never overlap the kernel or leave low RAM.
void plan(std::span<const uint8_t> elf) {
  using namespace tern;
  auto k = x86::parse_elf_kernel(elf);
  if (!k) return;
  const uint64_t exact = (k->paddr_end + 0xFFF) & ~uint64_t{0xFFF};
  for (uint64_t ram : {exact, uint64_t{3584} << 20, uint64_t{8} << 30}) {
    for (uint64_t initrd : {uint64_t{0}, uint64_t{4096}, uint64_t{1} << 30}) {
      auto p = x86::plan_pvh(*k, elf.size(), ram, "console=ttyS0", initrd);
      if (!p || initrd == 0) continue;
      if (p->initrd_gpa < p->kernel_end || p->initrd_gpa + initrd > std::min(ram, x86::kHoleStart))
        __builtin_trap();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tern;
  const std::span<const uint8_t> input(data, size);
  std::span<const uint8_t> payload = input;
  tern::Result<x86::BzImage> bz = tl::unexpected(Error{});
  // boot_flag 0xAA55 at 0x1FE and "HdrS" at 0x202: a bzImage (parse_bzimage checks the rest).
  if (size >= 0x250 && data[0x1FE] == 0x55 && data[0x1FF] == 0xAA &&
      std::memcmp(data + 0x202, "HdrS", 4) == 0) {
    bz = x86::parse_bzimage(input);
    if (!bz) return 0;
    // tern's own locator (what prepare_boot uses), checked against the fields it reads.
    auto located = x86::bzimage_compressed_payload(*bz, input);
    if (!located) return 0;
    const uint64_t off = load_le32(input, 0x248), len = load_le32(input, 0x24C);
    if (located->data() < data || located->data() + located->size() > data + size ||
        located->size() != len ||
        static_cast<uint64_t>(located->data() - data) != (uint64_t{bz->setup_sects} + 1) * 512 + off)
      __builtin_trap();
    payload = *located;
  }
  if (x86::detect_payload_compression(payload) == x86::PayloadCompression::kNone) {
    plan(payload);
    return 0;
  }
  auto elf = x86::decompress_payload(payload, kMaxOutputBytes);
  if (elf) plan(elf->bytes());
  return 0;
}
