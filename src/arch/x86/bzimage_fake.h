// Synthetic bzImages for unit tests: a minimal, valid 64-bit boot protocol header over a patterned
// payload. Header-only; tests tweak fields with poke() to build broken images.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "arch/x86/boot_params.h"

namespace tern::x86::testing {

inline constexpr const char* kDebianKernelPath = "/boot/vmlinuz-6.1.0-57-cloud-amd64";
inline constexpr const char* kDebianInitrdPath = "/boot/initrd.img-6.1.0-57-cloud-amd64";
/// Debian 12's memtest86+ 6.10 (package memtest86+): boot protocol 2.12, 64-bit entry, not
/// relocatable, its file 8 bytes short of syssize * 16.
inline constexpr const char* kMemtestPath = "/boot/memtest86+x64.bin";

struct FakeKernel {
  uint8_t setup_sects = 4;
  uint16_t version = 0x020F;
  uint8_t loadflags = kLoadedHigh;
  uint16_t xloadflags = kXlfKernel64 | kXlfCanBeLoadedAbove4G;
  uint32_t init_size = 8 << 20;
  uint32_t cmdline_size = 2047;
  uint32_t initrd_addr_max = 0x7FFFFFFF;
  uint32_t kernel_alignment = 2 << 20;
  uint8_t relocatable_kernel = 1;
  uint64_t pref_address = 16 << 20;
  uint32_t payload_size = 64 << 10;
};

/// Writes `v` at byte offset `off` of `file` (little-endian, any alignment).
template <class T>
void poke(std::vector<uint8_t>& file, size_t off, T v) {
  std::memcpy(file.data() + off, &v, sizeof v);
}

/// Payload byte i of a fake kernel.
inline uint8_t fake_payload_byte(size_t i) {
  return static_cast<uint8_t>(i * 7 + 3);
}

/// A bzImage file: setup sectors with the header (ending at 0x26C) and a version string, then
/// `payload_size` patterned bytes.
inline std::vector<uint8_t> make_fake_bzimage(const FakeKernel& k = {}) {
  const size_t setup_bytes = (size_t{k.setup_sects == 0 ? 4u : k.setup_sects} + 1) * 512;
  std::vector<uint8_t> f(setup_bytes + k.payload_size, 0);
  poke<uint8_t>(f, 0x1F1, k.setup_sects);
  poke<uint32_t>(f, 0x1F4, (k.payload_size + 15) / 16);  // syssize
  poke<uint16_t>(f, 0x1FE, kBootFlagMagic);
  poke<uint8_t>(f, 0x200, 0xEB);           // jmp short
  poke<uint8_t>(f, 0x201, 0x26C - 0x202);  // header ends at 0x26C
  std::memcpy(f.data() + 0x202, "HdrS", 4);
  poke<uint16_t>(f, 0x206, k.version);
  poke<uint16_t>(f, 0x20E, 0x300 - 0x200);  // kernel_version string at 0x300
  std::memcpy(f.data() + 0x300, "6.99.0-fake (tern tests)", 25);
  poke<uint8_t>(f, 0x211, k.loadflags);
  poke<uint32_t>(f, 0x214, 0x100000);  // code32_start
  poke<uint32_t>(f, 0x22C, k.initrd_addr_max);
  poke<uint32_t>(f, 0x230, k.kernel_alignment);
  poke<uint8_t>(f, 0x234, k.relocatable_kernel);
  poke<uint16_t>(f, 0x236, k.xloadflags);
  poke<uint32_t>(f, 0x238, k.cmdline_size);
  poke<uint64_t>(f, 0x258, k.pref_address);
  poke<uint32_t>(f, 0x260, k.init_size);
  for (size_t i = 0; i < k.payload_size; ++i) f[setup_bytes + i] = fake_payload_byte(i);
  return f;
}

/// Reads a whole file, or nullopt if it cannot be opened.
inline std::optional<std::vector<uint8_t>> read_test_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

}  // namespace tern::x86::testing
