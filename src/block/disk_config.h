// DiskConfig: what the user asked for one disk (--disk path=...,cache=...,readonly=...), before
// anything is opened. The virtio-pci/CLI side fills it in; VirtioBlock::create() validates it by
// opening the image (errors name the --disk field concerned) before the guest boots.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"

namespace tern {

/// Host cache mode, named as QEMU names them (-drive cache=...).
enum class CacheMode {
  kWriteback,   ///< "writeback": page cache; FLUSH -> fdatasync() before completing.
  kNone,        ///< "none": O_DIRECT; unaligned guest buffers bounced; FLUSH -> fdatasync().
  kUnsafe,      ///< "unsafe": page cache; FLUSH completes without syncing.
  kDirectSync,  ///< "directsync": O_DIRECT | O_DSYNC; every write is durable on completion.
};

/// Which I/O engine serves the disk's queues.
enum class IoEngineKind {
  kIoUring,  ///< "io_uring" (default): liburing, batched submission; falls back to kThreads
             ///< with one log line when the host's io_uring lacks what tern needs.
  kThreads,  ///< "threads": a small pool of threads doing preadv/pwritev.
};

/// What the guest sees the disk as (--disk interface=..., drive body "interface").
enum class DiskInterface : uint8_t {
  kVirtio,  ///< "virtio" (default): virtio-blk on PCI, /dev/vdX.
  kNvme,    ///< "nvme": an emulated NVMe controller (src/nvme), /dev/nvmeXn1.
};

/// How the image's bytes are read (--disk format=..., drive body "format").
enum class DiskFormat : uint8_t {
  kAuto,   ///< Not given (default): probed at open. A file starting with the qcow2 magic
           ///< "QFI\xfb" is served as qcow2 (never with its backing file unless
           ///< backing_files=on), anything else as raw.
  kRaw,    ///< "raw": the file's bytes are the disk's, whatever they contain.
  kQcow2,  ///< "qcow2": a qcow2 image (src/block/qcow2); refused when the magic is missing.
};

/// Largest --disk coalesce_us= / poll_us= (µs); virtio::kMaxNotifyTuningUs.
inline constexpr uint32_t kMaxNotifyTuningUs = 10'000;

/// Maximum serial length: VIRTIO_BLK_ID_BYTES (virtio 1.2 §5.2.6).
inline constexpr size_t kVirtioBlkIdBytes = 20;

/// Longest vhost-user socket path: sizeof(sockaddr_un::sun_path) - 1 (a NUL-terminated path).
inline constexpr size_t kMaxVhostUserSocketBytes = 107;

/// One disk as configured by the user. Plain value; validated by VirtioBlock::create().
struct DiskConfig {
  std::string path;                           ///< Raw image file or block device.
  CacheMode cache = CacheMode::kWriteback;
  bool read_only = false;                     ///< Offer VIRTIO_BLK_F_RO; open O_RDONLY.
  std::string serial;                         ///< GET_ID answer; at most 20 bytes.
  uint16_t queues = 1;                        ///< Request queues (VIRTIO_BLK_F_MQ when > 1); 1..64.
  uint16_t queue_size = 256;                  ///< max_queue_size() offered; power of two 2..1024.
  IoEngineKind engine = IoEngineKind::kIoUring;
  /// Non-empty: a vhost-user-blk disk (--disk vhost-user=SOCKET, drive body "socket"): served by
  /// the back-end listening at this Unix socket (src/vhost_user/frontend). `path` is then empty
  /// and only `queues` and `queue_size` apply (cache, readonly, serial, io are the back-end's).
  std::string vhost_user_socket;
  /// virtio (default) or nvme. An NVMe disk takes path, cache, readonly, serial and io; queues
  /// and queue_size are virtio's (refused by name: the guest creates NVMe queues itself, up to
  /// one per vCPU); vhost-user= is refused.
  DiskInterface interface = DiskInterface::kVirtio;
  /// on (default): the image is locked while open (block/image_lock.h: a write lock, or a read
  /// lock when read_only), so a second tern cannot open it for writing; off (QEMU's
  /// locking=off): no lock taken or tested. Not with vhost-user (the back-end's).
  bool locking = true;
  /// raw, qcow2, or probed (the default; DiskFormat). Not with vhost-user (the back-end's).
  DiskFormat format = DiskFormat::kAuto;
  /// on: a qcow2 image's backing file (and its chain) is opened, read-only. off (default): an
  /// image that names a backing file is refused, naming this key: the backing file name sits in
  /// bytes a guest may have written, so tern opens host paths from it only when the user says so.
  bool backing_files = false;
  /// Notification tuning of a virtio-blk disk tern serves (virtio/notify_tuning.h; refused with
  /// vhost-user= and interface=nvme, naming the key). kick_suppress=on|off: the guest's
  /// notifications stay off while requests are in flight. coalesce_us=N: a completion interrupt
  /// is held up to N µs while other requests are in flight (0 = off). poll_us=N: the idle queue
  /// is polled N µs before sleeping (0 = off). N in 0..10000. kick_suppress is on by default
  /// (it pays at queue depth >= 4 and cannot touch depth 1: docs/block-benchmark.md), the other
  /// two off (no measurable gain in the nested test host; coalescing adds latency, polling CPU).
  bool kick_suppress = true;
  uint32_t coalesce_us = 0;
  uint32_t poll_us = 0;
};

/// "writeback" | "none" | "unsafe" | "directsync" -> CacheMode; the error names the field
/// ("--disk cache=<value>: unknown cache mode (writeback, none, unsafe, directsync)").
[[nodiscard]] Result<CacheMode> parse_cache_mode(std::string_view s);
/// "io_uring" | "threads" -> IoEngineKind; error names "--disk engine=".
[[nodiscard]] Result<IoEngineKind> parse_io_engine(std::string_view s);
/// "virtio" | "nvme" -> DiskInterface; error names "--disk interface=".
[[nodiscard]] Result<DiskInterface> parse_disk_interface(std::string_view s);
[[nodiscard]] std::string_view disk_interface_name(DiskInterface i);
/// "raw" | "qcow2" -> DiskFormat; error names "--disk format=".
[[nodiscard]] Result<DiskFormat> parse_disk_format(std::string_view s);
/// "auto" (not given), "raw", "qcow2".
[[nodiscard]] std::string_view disk_format_name(DiskFormat f);
[[nodiscard]] std::string_view cache_mode_name(CacheMode m);
[[nodiscard]] std::string_view io_engine_name(IoEngineKind k);

/// Checks the fields that need no file system access (serial length, queue counts); the error
/// names the --disk field. VirtioBlock::create() calls it first. A vhost-user disk
/// (vhost_user_socket non-empty, at most kMaxVhostUserSocketBytes, no NUL) must leave path,
/// cache, read_only, serial, engine and locking at their defaults: each is refused naming its --disk key
/// ("--disk cache: not with vhost-user= (the host cache mode is the back-end's)").
[[nodiscard]] Result<void> validate_disk_config(const DiskConfig& c);

}  // namespace tern
