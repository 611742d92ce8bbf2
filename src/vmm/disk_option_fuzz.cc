// libFuzzer target: tern's command-line value parsers on arbitrary text — the --disk SPEC
// (parse_disk_option: path= or vhost-user=), sizes (--memory, --rate-limit: parse_size) and the
// cache-mode and I/O-engine names. Nothing may crash. What parse_disk_option accepts is checked
// against the text itself (an independent split of its items: the image path is the given path= value, made
// absolute; the socket is the given vhost-user= value, made absolute too) and must round-trip: the DiskConfig
// rendered back to an option string parses to the same DiskConfig. A size parse_size accepts,
// written again in KiB or MiB, parses back to the same number of bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <unistd.h>

#include "base/size.h"
#include "base/testing/fuzz_input.h"
#include "vmm/disk_option.h"

namespace {

using namespace tern;

// The value of `key` in "k=v,k=v" text, split here without the parser's code (its last
// occurrence; the parser refuses a key given twice anyway).
std::optional<std::string_view> item(std::string_view text, std::string_view key) {
  std::optional<std::string_view> found;
  while (true) {
    size_t comma = text.find(',');
    std::string_view it = text.substr(0, comma);
    size_t eq = it.find('=');
    if (eq != std::string_view::npos && it.substr(0, eq) == key) found = it.substr(eq + 1);
    if (comma == std::string_view::npos) return found;
    text.remove_prefix(comma + 1);
  }
}

// The option string that asks for exactly `d`: every key its kind of disk takes.
std::string render(const DiskConfig& d) {
  auto on_off = [](bool b) { return b ? std::string("on") : std::string("off"); };
  std::string s;
  if (!d.vhost_user_socket.empty()) {
    s = "vhost-user=" + d.vhost_user_socket;
  } else {
    s = "path=" + d.path + ",cache=" + std::string(cache_mode_name(d.cache)) +
        ",readonly=" + on_off(d.read_only) + ",io=" + std::string(io_engine_name(d.engine)) +
        ",locking=" + on_off(d.locking) + ",interface=" +
        std::string(disk_interface_name(d.interface));
    if (!d.serial.empty()) s += ",serial=" + d.serial;
    if (d.format != DiskFormat::kAuto) s += ",format=" + std::string(disk_format_name(d.format));
    s += ",backing_files=" + on_off(d.backing_files);
  }
  if (d.interface != DiskInterface::kNvme) {
    s += ",queues=" + std::to_string(d.queues) + ",queue_size=" + std::to_string(d.queue_size);
    if (d.vhost_user_socket.empty())
      s += ",kick_suppress=" + on_off(d.kick_suppress) +
           ",coalesce_us=" + std::to_string(d.coalesce_us) +
           ",poll_us=" + std::to_string(d.poll_us);
  }
  return s;
}

bool same(const DiskConfig& a, const DiskConfig& b) {
  return a.path == b.path && a.cache == b.cache && a.read_only == b.read_only &&
         a.serial == b.serial && a.queues == b.queues && a.queue_size == b.queue_size &&
         a.engine == b.engine && a.vhost_user_socket == b.vhost_user_socket &&
         a.interface == b.interface && a.locking == b.locking &&
         a.kick_suppress == b.kick_suppress && a.coalesce_us == b.coalesce_us &&
         a.poll_us == b.poll_us && a.format == b.format && a.backing_files == b.backing_files;
}

// `p` lexically normalised ("a/./b//c" -> "a/b/c"), without a trailing '/'.
std::string normal(const std::string& p) {
  std::string n = std::filesystem::path(p).lexically_normal().string();
  while (n.size() > 1 && n.back() == '/') n.pop_back();
  return n;
}

std::string cwd() {
  char buf[4096];
  return ::getcwd(buf, sizeof buf) ? std::string(buf) : std::string();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto d = parse_disk_option(text)) {
    auto path = item(text, "path");
    auto socket = item(text, "vhost-user");
    // Exactly one of path= and vhost-user= was given, and the DiskConfig holds that value.
    FUZZ_CHECK(path.has_value() != socket.has_value());
    // A given path or socket is kept as given when absolute, else made absolute against the
    // current directory: the same file as cwd/given.
    auto kept_absolute = [](const std::string& got, std::string_view given) {
      if (given.front() == '/') {
        FUZZ_CHECK(got == given);
      } else {
        FUZZ_CHECK(!got.empty() && got.front() == '/');
        FUZZ_CHECK(normal(got) == normal(cwd() + "/" + std::string(given)));
      }
    };
    if (socket) {
      FUZZ_CHECK(!socket->empty() && d->path.empty());
      kept_absolute(d->vhost_user_socket, *socket);
      // A vhost-user disk leaves the image's keys to its back-end: none may have been given.
      for (const char* key :
           {"cache", "readonly", "serial", "io", "locking", "format", "backing_files"})
        FUZZ_CHECK(!item(text, key).has_value());
    } else {
      FUZZ_CHECK(d->vhost_user_socket.empty() && !path->empty());
      kept_absolute(d->path, *path);
    }
    if (auto serial = item(text, "serial")) FUZZ_CHECK(d->serial == *serial);
    FUZZ_CHECK(d->serial.size() <= kVirtioBlkIdBytes);
    FUZZ_CHECK(d->queues >= 1 && d->queues <= 64);
    FUZZ_CHECK(d->queue_size >= 2 && d->queue_size <= 1024 &&
               (d->queue_size & (d->queue_size - 1)) == 0);
    // Round trip: what it parsed, written out in full, parses to the same configuration.
    const std::string again = render(*d);
    auto back = parse_disk_option(again);
    if (!back) {
      std::fprintf(stderr, "rendered \"%s\" refused: %s\n", again.c_str(),
                   back.error().message().c_str());
      FUZZ_CHECK(back.has_value());
    }
    FUZZ_CHECK(same(*d, *back));
  } else {
    FUZZ_CHECK(!d.error().message().empty());
  }
  if (auto s = parse_size(text, "--memory")) {
    FUZZ_CHECK(*s > 0);
    // The same size written in KiB (or MiB: a bare number) parses back to the same bytes.
    if (*s % 1024 == 0) {
      auto back = parse_size(std::to_string(*s / 1024) + "K", "--memory");
      FUZZ_CHECK(back && *back == *s);
    }
    if (*s % (1ull << 20) == 0) {
      auto back = parse_size(std::to_string(*s >> 20), "--memory");
      FUZZ_CHECK(back && *back == *s);
    }
  }
  (void)parse_cache_mode(text);
  (void)parse_io_engine(text);
  return 0;
}
