// libFuzzer target: parse_bzimage on arbitrary bytes and, when it accepts them, load_linux into a
// small guest. Neither may crash, read out of bounds or write outside guest memory. What the
// parser accepts is checked against the file itself (read here from boot.rst's offsets, not
// through the parser): the boot flag and "HdrS" magic, the protocol version, the setup header
// bytes, and the payload: the file's bytes from (setup_sects + 1) * 512 on (any bytes beyond
// the file: zero, fewer than one 16-byte paragraph). What load_linux reports is checked against
// guest RAM and the RAM size: every range inside RAM, the payload, command line and initrd
// bytes where it says they are, boot_params carrying the header magic.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <vector>

#include "arch/x86/bzimage.h"
#include "arch/x86/linux_loader.h"
#include "base/testing/fuzz_input.h"

namespace {

uint16_t le16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }

// [gpa, gpa + len) inside [0, ram) without wrapping.
bool in_ram(uint64_t gpa, uint64_t len, uint64_t ram) { return gpa <= ram && len <= ram - gpa; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tern;
  auto kernel = x86::parse_bzimage(std::span<const uint8_t>(data, size));
  if (!kernel) return 0;

  // The header, read from the file at boot.rst's offsets.
  FUZZ_CHECK(size >= 0x202 + 4 + 1);
  FUZZ_CHECK(le16(data + 0x1FE) == 0xAA55);
  FUZZ_CHECK(std::memcmp(data + 0x202, "HdrS", 4) == 0);
  FUZZ_CHECK(kernel->version == le16(data + 0x206) && kernel->version >= x86::kMinBootProtocol);
  const size_t hdr_end = 0x202 + size_t{data[0x201]};
  FUZZ_CHECK(hdr_end <= size && kernel->setup_header.size() == hdr_end - 0x1F1);
  FUZZ_CHECK(std::equal(kernel->setup_header.begin(), kernel->setup_header.end(), data + 0x1F1));
  const unsigned setup_sects = data[0x1F1] == 0 ? 4 : data[0x1F1];
  FUZZ_CHECK(kernel->setup_sects == setup_sects);
  const size_t payload_off = (size_t{setup_sects} + 1) * 512;
  FUZZ_CHECK(payload_off < size);
  const size_t in_file = size - payload_off;
  FUZZ_CHECK(kernel->payload.size() >= in_file && kernel->payload.size() - in_file < 16);
  FUZZ_CHECK(std::equal(data + payload_off, data + size, kernel->payload.begin()));
  FUZZ_CHECK(std::all_of(kernel->payload.begin() + static_cast<std::ptrdiff_t>(in_file),
                         kernel->payload.end(), [](uint8_t b) { return b == 0; }));
  FUZZ_CHECK(kernel->init_size != 0);

  static std::vector<uint8_t> ram(64 << 20);
  auto mem = GuestMemory::wrap({MemoryRegion{0, ram.size(), ram.data(), 0}});
  constexpr std::string_view kCmdline = "console=ttyS0";
  const std::span<const uint8_t> initrd(data, size < 4096 ? size : 4096);
  auto boot = x86::load_linux(mem, ram.size(), *kernel, kCmdline, initrd);
  if (!boot) return 0;
  const uint64_t n = ram.size();
  // The payload at its load address, the 64-bit entry 0x200 into it.
  const x86::KernelFootprint& k = boot->kernel;
  FUZZ_CHECK(in_ram(k.load_gpa, kernel->payload.size(), n));
  FUZZ_CHECK(k.payload_end == k.load_gpa + kernel->payload.size());
  FUZZ_CHECK(boot->entry_rip == k.load_gpa + x86::kEntry64Offset);
  FUZZ_CHECK(std::equal(kernel->payload.begin(), kernel->payload.end(), ram.begin() + k.load_gpa));
  // The command line and its NUL; the initrd, not overlapping the payload.
  FUZZ_CHECK(boot->cmdline_len == kCmdline.size() && in_ram(boot->cmdline_gpa, kCmdline.size() + 1, n));
  FUZZ_CHECK(std::memcmp(ram.data() + boot->cmdline_gpa, kCmdline.data(), kCmdline.size()) == 0 &&
             ram[boot->cmdline_gpa + kCmdline.size()] == 0);
  FUZZ_CHECK(boot->initrd_size == initrd.size() && in_ram(boot->initrd_gpa, initrd.size(), n));
  FUZZ_CHECK(std::equal(initrd.begin(), initrd.end(), ram.begin() + boot->initrd_gpa));
  FUZZ_CHECK(boot->initrd_gpa >= k.end || boot->initrd_gpa + initrd.size() <= k.load_gpa);
  // boot_params (the zero page): the header magic in place; the e820 map within RAM.
  FUZZ_CHECK(in_ram(boot->boot_params_gpa, 4096, n));
  FUZZ_CHECK(le16(ram.data() + boot->boot_params_gpa + 0x1FE) == 0xAA55);
  FUZZ_CHECK(std::memcmp(ram.data() + boot->boot_params_gpa + 0x202, "HdrS", 4) == 0);
  for (const auto& e : boot->e820)
    if (e.type == 1) FUZZ_CHECK(in_ram(e.addr, e.size, n));
  return 0;
}
