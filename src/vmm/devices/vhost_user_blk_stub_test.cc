// TEMPORARY (branch vu-surface, until vu-front's src/vhost_user/frontend/vhost_user_blk.cc lands):
// make_vhost_user_blk() as a back-end that is not there, so that the unit tests link and
// DiskKind's vhost-user paths can be tested. Delete this file when merging vu-front.
#include <cerrno>

#include "vhost_user/frontend/vhost_user_blk.h"

namespace tern {

Result<std::shared_ptr<virtio::VirtioDeviceBase>> make_vhost_user_blk(const DiskConfig& config,
                                                                      std::string) {
  return fail_code(ENOENT, config.vhost_user_socket + ": connect");
}

}  // namespace tern
