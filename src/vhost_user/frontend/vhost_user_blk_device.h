// VhostUserBlk, the class behind make_vhost_user_blk (vhost_user_blk.h has the life cycle): a
// VirtioDeviceBase whose every queue is external, served by a BackendSession. Exposed for tests
// (short timeouts) and for whoever needs more than the factory.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "block/disk_config.h"
#include "vhost_user/frontend/backend_session.h"
#include "vhost_user/frontend/vhost_user_blk.h"
#include "virtio/virtio_device_base.h"

namespace tern {

/// See vhost_user_blk.h. Thread-safety: as VirtioDeviceBase; read_config/write_config never
/// reach the back-end.
class VhostUserBlk final : public virtio::VirtioDeviceBase {
 public:
  /// make_vhost_user_blk with explicit timeouts. Errors name the socket (and the request, or
  /// the --disk field).
  [[nodiscard]] static Result<std::shared_ptr<VhostUserBlk>> create(
      const DiskConfig& config, std::string name, vhost_user::SessionOptions options);
  ~VhostUserBlk() override;

  /// The cached config space (GET_CONFIG at create(), num_queues patched); zeros past its end.
  void read_config(uint64_t offset, std::span<uint8_t> data) override;
  /// Ignored: CONFIG_WCE is not offered, so no field is writable (vhost_user/frontend/
  /// blk_features.h), and nothing reaches the back-end from a vCPU thread.
  void write_config(uint64_t, std::span<const uint8_t>) override {}
  [[nodiscard]] std::string_view kind() const override { return "vhost-user-blk"; }

 protected:
  Result<std::unique_ptr<virtio::QueueHandler>> make_queue_handler(uint16_t, const VirtqueueConfig&,
                                                                   uint64_t) override;
  [[nodiscard]] bool external_queue(uint16_t, uint64_t) const override { return true; }
  Result<std::unique_ptr<virtio::ExternalQueues>> start_external(
      const GuestMemory& mem, uint64_t acked, std::vector<virtio::ExternalQueue> queues,
      std::shared_ptr<VirtioInterrupt> interrupt) override;
  void device_counters(std::vector<std::pair<std::string, uint64_t>>& out) const override;

 private:
  VhostUserBlk(std::string name, uint64_t features, const DiskConfig& config,
               std::vector<uint8_t> config_space,
               std::unique_ptr<vhost_user::BackendSession> session);

  const std::vector<uint8_t> config_space_;
  std::unique_ptr<vhost_user::BackendSession> session_;
};

}  // namespace tern
