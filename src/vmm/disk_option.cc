#include "vmm/disk_option.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <string>

#include "base/host_path.h"
#include "base/key_value_list.h"

namespace tern {

namespace {

constexpr std::string_view kKeys =
    "keys: path, vhost-user, interface, cache, readonly, serial, queues, queue_size, io, locking, "
    "format, backing_files, kick_suppress, coalesce_us, poll_us";

Result<unsigned> parse_number(std::string_view key, std::string_view v, unsigned max,
                              const char* range) {
  unsigned n = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || p != v.data() + v.size() || v.empty() || n > max)
    return fail("--disk " + std::string(key) + "=" + std::string(v), range);
  return n;
}

Result<uint16_t> parse_queues(std::string_view v) {
  ASSIGN_OR_RETURN(unsigned n, parse_number("queues", v, 64, "must be a number in 1..64"));
  if (n == 0) return fail("--disk queues=" + std::string(v), "must be a number in 1..64");
  return static_cast<uint16_t>(n);
}

// The keys a vhost-user disk leaves to its back-end, and what each one is there.
struct BackendKey {
  std::string_view key;
  std::string_view what;
  std::string_view hint;  ///< What to do instead ("" when obvious).
};
constexpr std::array<BackendKey, 11> kBackendKeys = {{
    {"path", "the image", ""},
    {"cache", "the host cache mode", ""},
    {"readonly", "read-only access", ": export the disk read-only"},
    {"serial", "the serial (GET_ID)", ""},
    {"io", "the I/O engine", ""},
    {"locking", "image locking", ""},
    {"format", "the image format", ""},
    {"backing_files", "opening backing files", ""},
    {"kick_suppress", "notification handling", ""},
    {"coalesce_us", "interrupt coalescing", ""},
    {"poll_us", "polling", ""},
}};

Result<bool> parse_on_off(std::string_view key, std::string_view v) {
  if (v == "on") return true;
  if (v == "off") return false;
  return fail("--disk " + std::string(key) + "=" + std::string(v), "must be on or off");
}

}  // namespace

Result<DiskConfig> parse_disk_option(std::string_view text) {
  DiskConfig c;
  bool have_path = false;
  bool have_socket = false;
  if (text.empty())
    return fail("--disk", "empty value (expected path=FILE or vhost-user=SOCKET[,key=value...])");
  ASSIGN_OR_RETURN(auto items, split_key_values(text, "--disk", kKeys));
  for (auto [k, value] : items) {
    std::string key(k);
    if (key == "path") {
      if (value.empty()) return fail("--disk path", "empty path");
      c.path = std::string(value);
      have_path = true;
    } else if (key == "vhost-user") {
      if (value.empty()) return fail("--disk vhost-user", "empty socket path");
      c.vhost_user_socket = std::string(value);
      have_socket = true;
    } else if (key == "interface") {
      ASSIGN_OR_RETURN(c.interface, parse_disk_interface(value));
    } else if (key == "cache") {
      ASSIGN_OR_RETURN(c.cache, parse_cache_mode(value));
    } else if (key == "readonly") {
      ASSIGN_OR_RETURN(c.read_only, parse_on_off(key, value));
    } else if (key == "locking") {
      ASSIGN_OR_RETURN(c.locking, parse_on_off(key, value));
    } else if (key == "format") {
      ASSIGN_OR_RETURN(c.format, parse_disk_format(value));
    } else if (key == "backing_files") {
      ASSIGN_OR_RETURN(c.backing_files, parse_on_off(key, value));
    } else if (key == "serial") {
      c.serial = std::string(value);  // its length: validate_disk_config, which knows the interface
    } else if (key == "queues") {
      ASSIGN_OR_RETURN(c.queues, parse_queues(value));
    } else if (key == "queue_size") {
      ASSIGN_OR_RETURN(
          unsigned n, parse_number("queue_size", value, 1024, "must be a power of two in 2..1024"));
      c.queue_size = static_cast<uint16_t>(n);  // power of two: validate_disk_config
    } else if (key == "kick_suppress") {
      ASSIGN_OR_RETURN(c.kick_suppress, parse_on_off(key, value));
    } else if (key == "coalesce_us" || key == "poll_us") {
      ASSIGN_OR_RETURN(unsigned n, parse_number(key, value, kMaxNotifyTuningUs,
                                                "must be a number of µs in 0..10000"));
      (key == "poll_us" ? c.poll_us : c.coalesce_us) = n;
    } else if (key == "io") {
      if (value == "io_uring")
        c.engine = IoEngineKind::kIoUring;
      else if (value == "threads")
        c.engine = IoEngineKind::kThreads;
      else
        return fail("--disk io=" + std::string(value), "unknown I/O engine (io_uring, threads)");
    } else {
      return fail("--disk " + key, "unknown key (" + std::string(kKeys) + ")");
    }
  }
  if (c.interface == DiskInterface::kNvme) {
    // Refused when given at all, like the back-end's keys below.
    for (auto [k, value] : items) {
      if (k == "vhost-user") return fail("--disk interface=nvme", "not with vhost-user=");
      if (k == "queues" || k == "queue_size")
        return fail("--disk " + std::string(k),
                    "not with interface=nvme (the guest creates its NVMe queues, one per vCPU)");
      if (k == "kick_suppress" || k == "coalesce_us" || k == "poll_us")
        return fail("--disk " + std::string(k), "not with interface=nvme (virtio-blk only)");
    }
  }
  if (have_socket) {
    // Refused when given at all, even at its default value: the user meant something by it.
    for (auto [k, value] : items) {
      auto b = std::ranges::find(kBackendKeys, k, &BackendKey::key);
      if (b != kBackendKeys.end())
        return fail("--disk " + std::string(k), "not with vhost-user= (" + std::string(b->what) +
                                                    " is the back-end's" + std::string(b->hint) +
                                                    ")");
    }
  } else if (!have_path) {
    return fail("--disk path",
                "missing (--disk path=FILE[,...] or --disk vhost-user=SOCKET[,...])");
  }
  // Kept absolute: the VM's configuration (GET /vm/config, a snapshot's machine section) must
  // name the same image, or back-end socket, whatever directory a later `tern restore` runs in.
  // (Before validation: an absolute socket path must still fit sockaddr_un.sun_path.)
  if (have_socket) {
    ASSIGN_OR_RETURN(c.vhost_user_socket, absolute_host_path(c.vhost_user_socket,
                                                             "--disk vhost-user=" + c.vhost_user_socket));
  }
  TRY(validate_disk_config(c));
  if (have_path) {
    ASSIGN_OR_RETURN(c.path, absolute_host_path(c.path, "--disk path=" + c.path));
  }
  return c;
}

}  // namespace tern
