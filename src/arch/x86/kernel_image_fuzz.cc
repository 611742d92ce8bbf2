// libFuzzer target: the front end of direct kernel loading on arbitrary bytes. A bzImage is parsed
// (parse_bzimage) and its payload located by the setup header's payload_offset/payload_length
// (boot.rst, protocol 2.08+); anything else is taken as a payload or ELF itself. The payload is
// decompressed (at most 16 MiB) and the result, or an uncompressed input, parsed as a vmlinux
// (parse_elf_kernel). None of it may crash, read outside the input or write outside its buffers.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "arch/x86/bzimage.h"
#include "arch/x86/elf_kernel.h"
#include "arch/x86/kernel_payload.h"

namespace {

constexpr uint64_t kMaxOutputBytes = 16 << 20;

uint32_t load_le32(std::span<const uint8_t> b, size_t off) {
  uint32_t v = 0;
  std::memcpy(&v, b.data() + off, sizeof v);
  return v;
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
    const uint64_t off = load_le32(input, 0x248), len = load_le32(input, 0x24C);
    if (off + len > bz->payload.size()) return 0;
    payload = std::span<const uint8_t>(bz->payload).subspan(off, len);
  }
  if (x86::detect_payload_compression(payload) == x86::PayloadCompression::kNone) {
    (void)x86::parse_elf_kernel(payload);
    return 0;
  }
  auto elf = x86::decompress_payload(payload, kMaxOutputBytes);
  if (elf) (void)x86::parse_elf_kernel(elf->bytes());
  return 0;
}
