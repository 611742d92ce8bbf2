#include "block/disk_config.h"

namespace tern {

Result<CacheMode> parse_cache_mode(std::string_view s) {
  if (s == "writeback") return CacheMode::kWriteback;
  if (s == "none") return CacheMode::kNone;
  if (s == "unsafe") return CacheMode::kUnsafe;
  if (s == "directsync") return CacheMode::kDirectSync;
  return fail("--disk cache=" + std::string(s),
              "unknown cache mode (writeback, none, unsafe, directsync)");
}

Result<IoEngineKind> parse_io_engine(std::string_view s) {
  if (s == "io_uring") return IoEngineKind::kIoUring;
  if (s == "threads") return IoEngineKind::kThreads;
  return fail("--disk engine=" + std::string(s), "unknown I/O engine (io_uring, threads)");
}

Result<DiskInterface> parse_disk_interface(std::string_view s) {
  if (s == "virtio") return DiskInterface::kVirtio;
  if (s == "nvme") return DiskInterface::kNvme;
  return fail("--disk interface=" + std::string(s), "unknown disk interface (virtio, nvme)");
}

Result<DiskFormat> parse_disk_format(std::string_view s) {
  if (s == "raw") return DiskFormat::kRaw;
  if (s == "qcow2") return DiskFormat::kQcow2;
  return fail("--disk format=" + std::string(s), "unknown image format (raw, qcow2)");
}

std::string_view disk_format_name(DiskFormat f) {
  switch (f) {
    case DiskFormat::kAuto:
      return "auto";
    case DiskFormat::kRaw:
      return "raw";
    case DiskFormat::kQcow2:
      return "qcow2";
  }
  return "?";
}

std::string_view disk_interface_name(DiskInterface i) {
  switch (i) {
    case DiskInterface::kVirtio:
      return "virtio";
    case DiskInterface::kNvme:
      return "nvme";
  }
  return "?";
}

std::string_view cache_mode_name(CacheMode m) {
  switch (m) {
    case CacheMode::kWriteback:
      return "writeback";
    case CacheMode::kNone:
      return "none";
    case CacheMode::kUnsafe:
      return "unsafe";
    case CacheMode::kDirectSync:
      return "directsync";
  }
  return "?";
}

std::string_view io_engine_name(IoEngineKind k) {
  return k == IoEngineKind::kIoUring ? "io_uring" : "threads";
}

namespace {

// A vhost-user disk: the image and how it is opened are the back-end's. Each field that is not
// at its default is refused by its --disk key.
Result<void> validate_vhost_user(const DiskConfig& c) {
  const std::string& s = c.vhost_user_socket;
  if (s.find('\0') != std::string::npos)
    return fail("--disk vhost-user", "socket path contains a NUL byte");
  if (s.size() > kMaxVhostUserSocketBytes)
    return fail("--disk vhost-user=" + s, "socket path longer than " +
                                              std::to_string(kMaxVhostUserSocketBytes) +
                                              " bytes (sockaddr_un.sun_path)");
  auto backends = [](const char* key, const char* what) {
    return fail(std::string("--disk ") + key,
                std::string("not with vhost-user= (") + what + " is the back-end's)");
  };
  const DiskConfig defaults;
  if (!c.path.empty()) return backends("path", "the image");
  if (c.cache != defaults.cache) return backends("cache", "the host cache mode");
  if (c.read_only != defaults.read_only) return backends("readonly", "read-only access");
  if (!c.serial.empty()) return backends("serial", "the serial (GET_ID)");
  if (c.engine != defaults.engine) return backends("io", "the I/O engine");
  if (c.locking != defaults.locking) return backends("locking", "image locking");
  if (c.format != defaults.format) return backends("format", "the image format");
  if (c.backing_files != defaults.backing_files)
    return backends("backing_files", "opening backing files");
  if (c.kick_suppress != defaults.kick_suppress)
    return backends("kick_suppress", "notification handling");
  if (c.coalesce_us != defaults.coalesce_us) return backends("coalesce_us", "interrupt coalescing");
  if (c.poll_us != defaults.poll_us) return backends("poll_us", "polling");
  return {};
}

// An NVMe disk: the guest creates its I/O queues (Create I/O Submission/Completion Queue), so
// virtio's queue keys have no meaning; the controller is tern's, so no vhost-user back-end.
Result<void> validate_nvme(const DiskConfig& c) {
  if (!c.vhost_user_socket.empty()) return fail("--disk interface=nvme", "not with vhost-user=");
  const DiskConfig defaults;
  if (c.queues != defaults.queues)
    return fail("--disk queues",
                "not with interface=nvme (the guest creates its NVMe queues, one per vCPU)");
  if (c.queue_size != defaults.queue_size)
    return fail("--disk queue_size",
                "not with interface=nvme (the guest chooses each NVMe queue's size, up to 1024 "
                "entries)");
  // The NVMe controller has its own interrupt coalescing, which the guest sets (Set Features,
  // Interrupt Coalescing, NVMe base spec 5.27.1.9).
  for (auto [key, given] : {std::pair{"kick_suppress", c.kick_suppress != defaults.kick_suppress},
                            std::pair{"coalesce_us", c.coalesce_us != defaults.coalesce_us},
                            std::pair{"poll_us", c.poll_us != defaults.poll_us}})
    if (given)
      return fail(std::string("--disk ") + key, "not with interface=nvme (virtio-blk only)");
  return {};
}

}  // namespace

Result<void> validate_disk_config(const DiskConfig& c) {
  if (c.interface == DiskInterface::kNvme) {
    TRY(validate_nvme(c));
  } else if (c.interface != DiskInterface::kVirtio) {
    return fail("--disk interface", "unknown disk interface");
  }
  if (!c.vhost_user_socket.empty()) {
    TRY(validate_vhost_user(c));
  } else if (c.path.empty()) {
    return fail("--disk path", "missing image path");
  }
  if (c.serial.size() > kVirtioBlkIdBytes)
    return fail("--disk serial=" + c.serial,
                c.interface == DiskInterface::kNvme
                    ? "longer than 20 bytes (the NVMe controller's SN field)"
                    : "longer than 20 bytes (VIRTIO_BLK_ID_BYTES)");
  if (c.queues == 0 || c.queues > 64)
    return fail("--disk queues=" + std::to_string(c.queues), "must be 1..64");
  if (c.queue_size < 2 || c.queue_size > 1024 || (c.queue_size & (c.queue_size - 1)) != 0)
    return fail("--disk queue_size=" + std::to_string(c.queue_size),
                "must be a power of two in 2..1024");
  for (auto [key, us] : {std::pair{"coalesce_us", c.coalesce_us}, std::pair{"poll_us", c.poll_us}})
    if (us > kMaxNotifyTuningUs)
      return fail(std::string("--disk ") + key + "=" + std::to_string(us), "must be 0..10000 (µs)");
  return {};
}

}  // namespace tern
