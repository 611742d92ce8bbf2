// libFuzzer target: parse_bzimage on arbitrary bytes and, when it accepts them, load_linux into a
// small guest. Neither may crash, read out of bounds or write outside guest memory.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "arch/x86/bzimage.h"
#include "arch/x86/linux_loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tern;
  auto kernel = x86::parse_bzimage(std::span<const uint8_t>(data, size));
  if (!kernel) return 0;
  static std::vector<uint8_t> ram(64 << 20);
  auto mem = GuestMemory::wrap({MemoryRegion{0, ram.size(), ram.data(), 0}});
  (void)x86::load_linux(mem, ram.size(), *kernel, "console=ttyS0",
                        std::span<const uint8_t>(data, size < 4096 ? size : 4096));
  return 0;
}
