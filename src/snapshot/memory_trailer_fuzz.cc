// libFuzzer target: the memory file's trailer, as tern restore reads it (open_memory_file at the
// state file's RAM extent) and as a save reads the previous memory file (memory_file_token at the
// file's last 4 KiB). Input: u16 RAM extent in bytes, then the file's bytes (held in a memfd).
// Nothing may crash; where both readers look at the same offset they must agree.
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "base/testing/fuzz_input.h"
#include "snapshot/memory_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tern::snap;
  if (size < 2) return 0;
  const uint64_t extent = data[0] | (uint64_t{data[1]} << 8);
  const uint8_t* file = data + 2;
  const size_t file_size = size - 2;
  int fd = ::memfd_create("tern-fuzz-mem", MFD_CLOEXEC);
  if (fd < 0) return 0;
  for (size_t done = 0; done < file_size;) {
    ssize_t n = ::write(fd, file + done, file_size - done);
    if (n <= 0) {
      ::close(fd);
      return 0;
    }
    done += static_cast<size_t>(n);
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  const std::array<tern::RegionSpec, 1> specs{{{0, extent}}};
  auto opened = open_memory_file(path, specs);
  auto token = memory_file_token(path);
  if (file_size < extent) FUZZ_CHECK(!opened);
  if (opened && token && file_size >= kMemoryTrailerSize &&
      extent == file_size - kMemoryTrailerSize)
    FUZZ_CHECK(opened->token == *token);
  ::close(fd);
  return 0;
}
