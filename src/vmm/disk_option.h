// The --disk command-line option: "path=FILE[,cache=MODE][,readonly=on][,serial=STR][,queues=N]
// [,queue_size=N][,io=io_uring|threads][,locking=off]" (a virtio-blk disk tern serves), or
// "path=FILE,interface=nvme[,cache=MODE][,readonly=on][,serial=STR][,io=...][,locking=off]" (an emulated NVMe
// controller, docs/nvme.md), or
// "vhost-user=SOCKET[,queues=N][,queue_size=N]" (a vhost-user-blk disk served by the back-end
// listening at SOCKET, docs/vhost-user.md), parsed into a DiskConfig (block/disk_config.h).
#pragma once

#include <string_view>

#include "base/result.h"
#include "block/disk_config.h"

namespace tern {

/// Parses one --disk value. Keys may come in any order, each at most once; `path` or
/// `vhost-user` is required. Values: cache = writeback | none | unsafe | directsync; readonly =
/// on | off; serial ≤ 20 bytes; queues = 1..64; queue_size = a power of two in 2..1024; io =
/// io_uring | threads; interface = virtio | nvme; locking = on (default: the image is locked
/// while open, block/image_lock.h) | off. With interface=nvme, vhost-user=, queues and
/// queue_size are refused by name ("--disk queues: not with interface=nvme (...)"). With vhost-user=, the keys path, cache, readonly, serial, io and locking are
/// refused by name (the back-end's: "--disk cache: not with vhost-user= (the host cache mode is
/// the back-end's)"). Errors name the field ("--disk cache=fast: unknown cache mode ..."). Only
/// the syntax and value ranges are checked here: whether the image exists, is writable or
/// supports O_DIRECT is checked when it is opened (VirtioBlock::create), whether the socket
/// listens when the front-end connects (make_vhost_user_blk), both still before the guest boots.
/// A relative `path` is made absolute against the current directory (absolute_host_path), so
/// GET /vm/config and a snapshot name the image wherever `tern restore` runs; a vhost-user
/// socket is kept as given.
[[nodiscard]] Result<DiskConfig> parse_disk_option(std::string_view text);

}  // namespace tern
