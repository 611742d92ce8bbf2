// libFuzzer target: tern's command-line value parsers on arbitrary text — the --disk SPEC
// (parse_disk_option: path= or vhost-user=), sizes (--memory, --rate-limit: parse_size) and the cache-mode and I/O-engine
// names. Nothing may crash; what they accept is within the documented ranges.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "base/size.h"
#include "base/testing/fuzz_input.h"
#include "vmm/disk_option.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tern;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto d = parse_disk_option(text)) {
    // An image or a vhost-user socket, never both; a vhost-user disk leaves the rest to its
    // back-end.
    FUZZ_CHECK(d->path.empty() != d->vhost_user_socket.empty());
    FUZZ_CHECK(d->path.size() < size);  // "path=" came with it
    FUZZ_CHECK(d->vhost_user_socket.size() <= kMaxVhostUserSocketBytes);
    if (!d->vhost_user_socket.empty())
      FUZZ_CHECK(!d->read_only && d->serial.empty() && d->locking);
    FUZZ_CHECK(d->serial.size() <= kVirtioBlkIdBytes);
    FUZZ_CHECK(d->queues >= 1 && d->queues <= 64);
    FUZZ_CHECK(d->queue_size >= 2 && d->queue_size <= 1024 &&
               (d->queue_size & (d->queue_size - 1)) == 0);
  } else {
    FUZZ_CHECK(!d.error().message().empty());
  }
  if (auto s = parse_size(text, "--memory")) FUZZ_CHECK(*s > 0);
  (void)parse_cache_mode(text);
  (void)parse_io_engine(text);
  return 0;
}
