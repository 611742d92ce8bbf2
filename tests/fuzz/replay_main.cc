// Replays saved libFuzzer inputs through LLVMFuzzerTestOneInput without libFuzzer, so corpora and
// crash reproducers under tests/fuzz/corpus/<name>/ run as ordinary (g++-built) regression tests.
// Usage: replay FILE_OR_DIR...; exit 1 if an argument cannot be read or holds no inputs.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {
bool run_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) return false;
  std::vector<uint8_t> b((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(b.data(), b.size());
  return true;
}
}  // namespace

int main(int argc, char** argv) {
  size_t n = 0;
  for (int i = 1; i < argc; ++i) {
    std::filesystem::path p(argv[i]);
    std::error_code ec;
    if (std::filesystem::is_directory(p, ec)) {
      for (const auto& e : std::filesystem::directory_iterator(p))
        if (e.is_regular_file() && run_file(e.path())) ++n;
    } else if (run_file(p)) {
      ++n;
    } else {
      std::fprintf(stderr, "replay: cannot read %s\n", argv[i]);
      return 1;
    }
  }
  std::printf("replay: %zu inputs ran\n", n);
  return n > 0 ? 0 : 1;
}
