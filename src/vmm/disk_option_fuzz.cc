// libFuzzer target: tern's command-line value parsers on arbitrary text — the --disk SPEC
// (parse_disk_option), sizes (--memory, --rate-limit: parse_size) and the cache-mode and I/O-engine
// names. Nothing may crash; what they accept is within the documented ranges.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "base/size.h"
#include "vmm/disk_option.h"

namespace {
void check(bool ok) {
  if (!ok) std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tern;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto d = parse_disk_option(text)) {
    check(!d->path.empty());
    check(d->path.size() < size);  // "path=" came with it
    check(d->serial.size() <= kVirtioBlkIdBytes);
    check(d->queues >= 1 && d->queues <= 64);
  } else {
    check(!d.error().message().empty());
  }
  if (auto s = parse_size(text, "--memory")) check(*s > 0);
  (void)parse_cache_mode(text);
  (void)parse_io_engine(text);
  return 0;
}
