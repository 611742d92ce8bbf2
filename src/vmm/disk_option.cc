#include "vmm/disk_option.h"

#include "base/key_value_list.h"

#include <charconv>
#include <string>

namespace tern {

namespace {

Result<uint16_t> parse_queues(std::string_view v) {
  unsigned n = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || p != v.data() + v.size() || n == 0 || n > 64)
    return fail("--disk queues=" + std::string(v), "must be a number in 1..64");
  return static_cast<uint16_t>(n);
}

}  // namespace

Result<DiskConfig> parse_disk_option(std::string_view text) {
  DiskConfig c;
  bool have_path = false;
  if (text.empty()) return fail("--disk", "empty value (expected path=FILE[,key=value...])");
  ASSIGN_OR_RETURN(auto items,
                   split_key_values(text, "--disk", "keys: path, cache, readonly, serial, queues, io"));
  for (auto [k, value] : items) {
    std::string key(k);
    if (key == "path") {
      if (value.empty()) return fail("--disk path", "empty path");
      c.path = std::string(value);
      have_path = true;
    } else if (key == "cache") {
      ASSIGN_OR_RETURN(c.cache, parse_cache_mode(value));
    } else if (key == "readonly") {
      if (value == "on")
        c.read_only = true;
      else if (value == "off")
        c.read_only = false;
      else
        return fail("--disk readonly=" + std::string(value), "must be on or off");
    } else if (key == "serial") {
      if (value.size() > kVirtioBlkIdBytes)
        return fail("--disk serial=" + std::string(value),
                    "longer than 20 bytes (VIRTIO_BLK_ID_BYTES)");
      c.serial = std::string(value);
    } else if (key == "queues") {
      ASSIGN_OR_RETURN(c.queues, parse_queues(value));
    } else if (key == "io") {
      if (value == "io_uring")
        c.engine = IoEngineKind::kIoUring;
      else if (value == "threads")
        c.engine = IoEngineKind::kThreads;
      else
        return fail("--disk io=" + std::string(value), "unknown I/O engine (io_uring, threads)");
    } else {
      return fail("--disk " + key,
                  "unknown key (keys: path, cache, readonly, serial, queues, io)");
    }
  }
  if (!have_path) return fail("--disk path", "missing (--disk path=FILE[,...])");
  TRY(validate_disk_config(c));
  return c;
}

}  // namespace tern
