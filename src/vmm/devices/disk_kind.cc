// DiskKind (device_kinds.h): virtio-blk in the device registry. A disk is one of two devices:
//  - a disk tern serves (VirtioBlock): tern opens the image, so a snapshot checks its size,
//    protects the file and flushes it;
//  - a vhost-user-blk disk (DiskConfig::vhost_user_socket non-empty; VhostUserBlk): the image,
//    if there is one, is the back-end process's. tern knows no size, no file and cannot flush
//    it, so those hooks do nothing for it (the back-end keeps its own data durable; a snapshot
//    keeps the back-end running, docs/vhost-user.md).
// Each hook dispatches on the spec (or, where it only has the device, on the device's type):
// a vhost-user device is never taken for a VirtioBlock.
#include <string>

#include "vhost_user/frontend/vhost_user_blk.h"
#include "virtio/block/virtio_block.h"
#include "vmm/devices/device_kinds.h"

namespace tern {

namespace {

bool is_vhost_user(const DiskSpec& s) {
  return !s.vhost_user_socket.empty();
}

/// The VirtioBlock `d` is, or null for a vhost-user disk.
const VirtioBlock* as_block(const VirtioDevice& d) {
  return dynamic_cast<const VirtioBlock*>(&d);
}

/// The front-end's error as the user sees it: "--disk vhost-user=PATH: <what failed>" (the
/// socket named once, however the device worded it), for CLI, API and config-file users alike.
Error vhost_user_error(const DiskSpec& s, Error e) {
  const std::string option = "--disk vhost-user=" + s.vhost_user_socket;
  if (e.op.starts_with("--disk ")) return e;  // already names the option (a validation error)
  std::string what = e.op;
  if (!e.context.empty()) what += (what.empty() ? "" : ": ") + e.context;
  for (const std::string& dup :
       {"vhost-user " + s.vhost_user_socket + ": ", s.vhost_user_socket + ": "})
    if (what.starts_with(dup)) what.erase(0, dup.size());
  e.op = option;
  e.context = std::move(what);
  return e;
}

}  // namespace

void encode_disk_format(snap::ByteWriter& w, const DiskConfig& c) {
  w.u8(static_cast<uint8_t>(c.format));
  w.boolean(c.backing_files);
}

Result<void> decode_disk_format(snap::ByteReader& r, DiskConfig& c) {
  ASSIGN_OR_RETURN(uint8_t format, r.u8());
  if (format > static_cast<uint8_t>(DiskFormat::kQcow2)) return fail(r.what(), "bad image format");
  c.format = static_cast<DiskFormat>(format);
  ASSIGN_OR_RETURN(c.backing_files, r.boolean());
  return {};
}

Result<std::shared_ptr<VirtioDevice>> DiskKind::make(const Spec& s, const std::string& name) {
  // An NVMe disk is an NvmeSpec (disk_device_spec()), never a virtio-blk disk.
  if (s.interface != DiskInterface::kVirtio)
    return fail("--disk interface=" + std::string(disk_interface_name(s.interface)),
                "not a virtio-blk disk");
  if (is_vhost_user(s)) {
    TRY(validate_disk_config(s));
    // Connects and negotiates now (before the guest boots): a back-end that is not listening,
    // refuses or does not answer fails the start here.
    auto dev = make_vhost_user_blk(s, name);
    if (!dev) return tl::unexpected(vhost_user_error(s, std::move(dev.error())));
    return std::shared_ptr<VirtioDevice>(std::move(*dev));
  }
  ASSIGN_OR_RETURN(auto blk, VirtioBlock::create(s, name));
  return std::shared_ptr<VirtioDevice>(std::move(blk));
}

// Machine section v2: path, cache, read-only, serial, queues, queue size, engine. v3 adds the
// vhost-user socket (empty: a disk tern serves), v4 the locking flag, v5 the notification tuning
// (kick_suppress, coalesce_us, poll_us: how the restored queues run, as the user asked), v6 the
// image format and backing_files (an explicit format=raw is never probed after a restore).
void DiskKind::encode(snap::ByteWriter& w, const Spec& c) {
  w.string(c.path);
  w.u8(static_cast<uint8_t>(c.cache));
  w.boolean(c.read_only);
  w.string(c.serial);
  w.u16(c.queues);
  w.u16(c.queue_size);
  w.u8(static_cast<uint8_t>(c.engine));
  w.string(c.vhost_user_socket);
  w.boolean(c.locking);
  w.boolean(c.kick_suppress);
  w.u32(c.coalesce_us);
  w.u32(c.poll_us);
  encode_disk_format(w, c);
}

Result<DiskKind::Spec> DiskKind::decode(snap::ByteReader& r, uint32_t version) {
  Spec c;
  ASSIGN_OR_RETURN(c.path, r.string());
  ASSIGN_OR_RETURN(uint8_t cache, r.u8());
  if (cache > static_cast<uint8_t>(CacheMode::kDirectSync)) return fail(r.what(), "bad cache mode");
  c.cache = static_cast<CacheMode>(cache);
  ASSIGN_OR_RETURN(c.read_only, r.boolean());
  ASSIGN_OR_RETURN(c.serial, r.string(64));
  ASSIGN_OR_RETURN(c.queues, r.u16());
  ASSIGN_OR_RETURN(c.queue_size, r.u16());
  ASSIGN_OR_RETURN(uint8_t engine, r.u8());
  if (engine > static_cast<uint8_t>(IoEngineKind::kThreads))
    return fail(r.what(), "bad I/O engine");
  c.engine = static_cast<IoEngineKind>(engine);
  if (version >= 3) {
    ASSIGN_OR_RETURN(c.vhost_user_socket, r.string(kMaxVhostUserSocketBytes));
  }
  if (version >= 4) {
    ASSIGN_OR_RETURN(c.locking, r.boolean());
  }
  if (version >= 5) {
    ASSIGN_OR_RETURN(c.kick_suppress, r.boolean());
    ASSIGN_OR_RETURN(c.coalesce_us, r.u32());
    ASSIGN_OR_RETURN(c.poll_us, r.u32());
  } else if (c.vhost_user_socket.empty()) {
    // Before version 5 there were no knobs: the queues ran with kicks on, no coalescing, no
    // polling (not today's defaults, which may differ). A vhost-user disk keeps the defaults:
    // its notifications are the back-end's, and validate_disk_config() refuses anything else.
    c.kick_suppress = false;
    c.coalesce_us = 0;
    c.poll_us = 0;
  }
  if (version >= 6) TRY(decode_disk_format(r, c));
  if (auto ok = validate_disk_config(c); !ok) return fail(r.what(), ok.error().message());
  return c;
}

// A vhost-user disk has no fact tern can check: its size is the back-end's (it may have grown
// or shrunk between save and restore, like any disk behind another process).
void DiskKind::save_facts(snap::ByteWriter& w, const Spec& s, const VirtioDevice& d) {
  if (is_vhost_user(s)) return;
  const VirtioBlock* blk = as_block(d);
  TERN_CHECK(blk != nullptr);  // make() built a VirtioBlock from a spec without a socket
  w.u64(blk->disk().size_bytes());
}

// Disk contents live in the image, so it must still be there (make() opened it) with its size.
Result<void> DiskKind::check_facts(snap::ByteReader& r, const Spec& s, const VirtioDevice& d) {
  if (is_vhost_user(s)) return r.expect_end();
  const VirtioBlock* blk = as_block(d);
  TERN_CHECK(blk != nullptr);
  ASSIGN_OR_RETURN(uint64_t saved, r.u64());
  TRY(r.expect_end());
  uint64_t now = blk->disk().size_bytes();
  if (now != saved)
    return fail(s.path + ": image is " + std::to_string(now) +
                " bytes, the snapshot was taken with " + std::to_string(saved) +
                " (the disk changed size)");
  return {};
}

// A vhost-user disk: no file of tern's (the back-end's image is out of tern's sight).
Result<std::vector<snap::ProtectedFile>> DiskKind::protected_files(const VirtioDevice& d,
                                                                   size_t index) {
  const VirtioBlock* blk = as_block(d);
  if (!blk) return std::vector<snap::ProtectedFile>{};
  const DiskImage& img = blk->disk();
  ASSIGN_OR_RETURN(
      auto f, snap::protected_file(img.fd().get(), "the VM's disk " + std::to_string(index) + " (" +
                                                       img.path() + ")"));
  return std::vector<snap::ProtectedFile>{std::move(f)};
}

// A vhost-user disk: nothing tern can do. The back-end completed the guest's writes under its
// own cache mode and keeps them (a guest FLUSH reached it as a request); tern has no fd to sync.
Result<void> DiskKind::flush(const VirtioDevice& d) {
  const VirtioBlock* blk = as_block(d);
  if (!blk) return {};
  return blk->disk().flush();
}

}  // namespace tern
